"""The measurement CSVs' one owner: round trips, one set of rules, every rejection named."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rlsched.interference.measurements import (
    COLOCATION_COLUMNS,
    SOLO_COLUMNS,
    ColocationData,
    MeasurementError,
    pair_table,
    read_colocation_csv,
    read_solo_csv,
    solo_table,
    write_colocation_csv,
    write_solo_csv,
)

COLO = "device,kind,partner,norm_throughput\nv100,A,B,0.7\nV100,A,B,0.5\nv100,B,A,0\np100,A,A,1.25\n"
SOLO = "device,kind,solo_throughput\nv100,A,10\nv100,A,14\np100,B,4.5\n"


def test_colocation_round_trip_keeps_every_row_and_every_bit(tmp_path: Path) -> None:
    data = ColocationData(["v100", "p100"], ["A", "B"], ["B", "A"], np.array([0.1 + 0.2, 2.0 / 3.0]))
    write_colocation_csv(tmp_path / "c.csv", data)
    back = read_colocation_csv(tmp_path / "c.csv")
    assert (back.device, back.kind, back.partner) == (data.device, data.kind, data.partner)
    assert back.y.tolist() == data.y.tolist()  # repr round trip: identical floats


def test_solo_round_trip(tmp_path: Path) -> None:
    rows = [("v100", "A", 1 / 3), ("p100", "B", 7.25)]
    write_solo_csv(tmp_path / "s.csv", rows)
    back = read_solo_csv(tmp_path / "s.csv")
    assert list(zip(back.device, back.kind, back.tput.tolist(), strict=True)) == rows
    assert (tmp_path / "s.csv").read_text().splitlines()[0] == ",".join(SOLO_COLUMNS)


def test_repeats_are_measurements_and_tables_average_them(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_text(COLO)
    (tmp_path / "s.csv").write_text(SOLO)
    data = read_colocation_csv(tmp_path / "c.csv")
    assert len(data) == 4  # the repeated (v100, A, B) row is kept
    table = pair_table(data)
    assert table[("v100", "A", "B")] == pytest.approx(0.6) and table[("v100", "B", "A")] == 0.0
    assert table[("p100", "A", "A")] == 1.25  # a single measurement is returned exactly
    assert solo_table(read_solo_csv(tmp_path / "s.csv")) == {("v100", "A"): 12.0, ("p100", "B"): 4.5}


def test_a_byte_order_mark_is_accepted_and_blank_lines_skipped(tmp_path: Path) -> None:
    (tmp_path / "c.csv").write_bytes(b"\xef\xbb\xbf" + COLO.replace("\np100", "\n\n  \np100").encode())
    assert len(read_colocation_csv(tmp_path / "c.csv")) == 4


HEAD = ",".join(COLOCATION_COLUMNS) + "\n"


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("device,kind,partner,tput\nv100,A,B,1\n", 1, "header", "a CSV header device,kind,partner"),
        (HEAD + "v100,A,B\n", 2, "", "4 fields"),
        (HEAD + "v100,A,B,0.5,1\n", 2, "", "4 fields"),
        (HEAD + " ,A,B,0.5\n", 2, "device", "a non-empty name"),
        (HEAD + "v100,,B,0.5\n", 2, "kind", "a non-empty name"),
        (HEAD + "v100,A, ,0.5\n", 2, "partner", "a non-empty name"),
        (HEAD + "v100,A,B,fast\n", 2, "norm_throughput", "[0, 2]"),
        (HEAD + "v100,A,B,2.5\n", 2, "norm_throughput", "[0, 2]"),
        (HEAD + "v100,A,B,-0.1\n", 2, "norm_throughput", "[0, 2]"),
        (HEAD + "v100,A,B,nan\n", 2, "norm_throughput", "[0, 2]"),
        (HEAD + "v100,A,B,0.5\nv100,B,A,inf\n", 3, "norm_throughput", "[0, 2]"),
        (HEAD, 0, "", "at least one data row"),
        ("", 1, "header", "a CSV header"),
    ],
)
def test_every_colocation_rejection_names_file_line_and_column(
    tmp_path: Path, text: str, line: int, column: str, fragment: str
) -> None:
    p = tmp_path / "c.csv"
    p.write_text(text)
    with pytest.raises(MeasurementError) as info:
        read_colocation_csv(p)
    e = info.value
    assert (e.path, e.line, e.column) == (str(p), line, column)
    assert str(e).startswith(str(p)) and fragment in str(e)


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("device,kind,solo\nv100,A,1\n", "header", "device,kind,solo_throughput"),
        ("device,kind,solo_throughput\nv100,A,0\n", "solo_throughput", "> 0"),
        ("device,kind,solo_throughput\nv100,A,-3\n", "solo_throughput", "> 0"),
        ("device,kind,solo_throughput\nv100,A,x\n", "solo_throughput", "> 0"),
        ("device,kind,solo_throughput\n,A,1\n", "device", "a non-empty name"),
    ],
)
def test_every_solo_rejection_names_the_column(tmp_path: Path, text: str, column: str, fragment: str) -> None:
    p = tmp_path / "s.csv"
    p.write_text(text)
    with pytest.raises(MeasurementError) as info:
        read_solo_csv(p)
    assert info.value.column == column and fragment in str(info.value)


def test_not_utf8_is_named(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    p.write_bytes(COLO.encode().replace(b"0.7", b"0.7\xff"))
    with pytest.raises(MeasurementError, match="UTF-8"):
        read_colocation_csv(p)
