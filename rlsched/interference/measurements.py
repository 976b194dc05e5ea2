"""The co-location and solo measurement CSVs (ARCHITECTURE.md section 7): their one reader and writer.

Co-location CSV, header ``device,kind,partner,norm_throughput``: the throughput of ``kind`` on
``device`` while ``partner`` runs beside it, over its throughput alone, in ``[0, 2]`` (0 = the two
cannot share the device). Solo CSV, header ``device,kind,solo_throughput``: runs per second of
``kind`` alone on ``device``, positive.

One set of rules for every reader (scenario loading, the simulator's ground truth, fitting and
evaluating the interference model, the profiler's output):

- the header is exactly the format's columns; blank lines are skipped; a UTF-8 byte-order mark
  (an Excel export) is accepted, other encodings are not;
- every row has every column; names are non-empty after stripping spaces;
- values are finite numbers in the format's range;
- a (device, kind, partner) or (device, kind) that appears more than once is a repeated
  measurement: every row is kept, and :func:`pair_table` / :func:`solo_table` average them;
- device names are matched case-insensitively (:func:`rlsched.hardware.device_models` maps them
  to catalog models).

Every rejection raises :class:`MeasurementError`, naming the file, the line and the column.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlsched.errors import NOTHING, InputError, csv_field
from rlsched.textfile import TextFileError, open_text

COLOCATION_COLUMNS: tuple[str, ...] = ("device", "kind", "partner", "norm_throughput")
SOLO_COLUMNS: tuple[str, ...] = ("device", "kind", "solo_throughput")
#: Largest normalised throughput accepted: co-running can help a little (cache sharing), not 2x.
NORM_THROUGHPUT_MAX = 2.0


class MeasurementError(InputError):
    """A measurement CSV that breaks a rule: ``PATH: line N (COLUMN): expected WHAT, got 'TEXT'``
    (``<file>`` for the file as a whole).

    :param path: the file.
    :param line: its line (1 = the header; 0 = the file as a whole).
    :param column: the column at fault, or ``""``.
    :param expected: what a valid value looks like.
    :param got: the offending text, or ``None``.
    """

    def __init__(
        self, path: str | Path, line: int, column: str, expected: str, got: str | None = None
    ) -> None:
        super().__init__(str(path), csv_field(line, column), expected, NOTHING if got is None else got)
        # After the base's init: the CSV line (0 = the file as a whole) and the column, as given.
        self.path, self.line, self.column = str(path), line, column

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        got = None if self.got is NOTHING else self.got
        return (type(self), (self.path, self.line, self.column, self.expected, got))


#: Kept for callers of the interference model's own name for it.
ColocationError = MeasurementError


@dataclass
class ColocationData:
    """Co-location measurements as columns.

    :param device: device names.
    :param kind: measured kinds.
    :param partner: kinds sharing the device with them.
    :param y: normalised throughputs (float64), 0 = cannot share.
    """

    device: list[str]
    kind: list[str]
    partner: list[str]
    y: np.ndarray

    def __post_init__(self) -> None:
        self.y = np.asarray(self.y, dtype=np.float64)
        n = len(self.device)
        if not (len(self.kind) == len(self.partner) == len(self.y) == n):
            raise ValueError(
                f"columns differ in length: device {n}, kind {len(self.kind)}, "
                f"partner {len(self.partner)}, y {len(self.y)}"
            )

    def __len__(self) -> int:
        return len(self.device)

    def take(self, idx: Iterable[int] | np.ndarray) -> ColocationData:
        """The rows at ``idx``."""
        ix = np.asarray(list(idx) if not isinstance(idx, np.ndarray) else idx, dtype=np.int64)
        return ColocationData(
            [self.device[i] for i in ix],
            [self.kind[i] for i in ix],
            [self.partner[i] for i in ix],
            self.y[ix],
        )

    @staticmethod
    def concat(parts: Sequence[ColocationData]) -> ColocationData:
        """All rows of ``parts``, in order."""
        return ColocationData(
            [d for p in parts for d in p.device],
            [k for p in parts for k in p.kind],
            [q for p in parts for q in p.partner],
            np.concatenate([p.y for p in parts]) if parts else np.zeros(0),
        )


@dataclass
class SoloData:
    """Solo measurements as columns: ``device``, ``kind`` and runs per second ``tput``."""

    device: list[str]
    kind: list[str]
    tput: np.ndarray

    def __len__(self) -> int:
        return len(self.device)


def _rows(path: Path, columns: tuple[str, ...]) -> list[tuple[int, list[str]]]:
    """(line, stripped cells) of every data row, the header and row widths checked."""
    try:
        f = open_text(path)
    except TextFileError as e:
        raise MeasurementError(path, 0, "", "a UTF-8 CSV file (save it as UTF-8)", e.where) from None
    with f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        if header != list(columns):
            raise MeasurementError(path, 1, "header", f"a CSV header {','.join(columns)}", ",".join(header))
        rows = []
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            if len(cells) != len(columns):
                raise MeasurementError(
                    path, reader.line_num, "", f"{len(columns)} fields ({','.join(columns)})", ",".join(cells)
                )
            stripped = [c.strip() for c in cells]
            for name, value in zip(columns[:-1], stripped, strict=False):
                if not value:
                    raise MeasurementError(path, reader.line_num, name, "a non-empty name", value)
            rows.append((reader.line_num, stripped))
    if not rows:
        raise MeasurementError(path, 0, "", "at least one data row")
    return rows


def _number(path: Path, line: int, column: str, text: str, lo: float, hi: float, lo_open: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi):
        rng = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]" if math.isfinite(hi) else f"> {lo:g}"
        raise MeasurementError(path, line, column, f"a number in {rng}", text)
    return v


def read_colocation_csv(path: str | Path) -> ColocationData:
    """Read a co-location CSV, every rule of the module checked.

    :raises MeasurementError: naming the file, the line and the column at fault.
    """
    p = Path(path)
    dev, kind, part, ys = [], [], [], []
    for line, (d, k, q, v) in _rows(p, COLOCATION_COLUMNS):
        ys.append(_number(p, line, "norm_throughput", v, 0.0, NORM_THROUGHPUT_MAX, lo_open=False))
        dev.append(d)
        kind.append(k)
        part.append(q)
    return ColocationData(dev, kind, part, np.array(ys))


def read_solo_csv(path: str | Path) -> SoloData:
    """Read a solo CSV, every rule of the module checked.

    :raises MeasurementError: naming the file, the line and the column at fault.
    """
    p = Path(path)
    dev, kind, ts = [], [], []
    for line, (d, k, v) in _rows(p, SOLO_COLUMNS):
        ts.append(_number(p, line, "solo_throughput", v, 0.0, math.inf, lo_open=True))
        dev.append(d)
        kind.append(k)
    return SoloData(dev, kind, np.array(ts))


def write_colocation_csv(path: str | Path, data: ColocationData) -> None:
    """Write ``data`` as a co-location CSV (values as shortest round-trip decimals)."""
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(COLOCATION_COLUMNS)
        for row in zip(data.device, data.kind, data.partner, data.y.tolist(), strict=True):
            w.writerow((*row[:3], repr(row[3])))


def write_solo_csv(path: str | Path, rows: Sequence[tuple[str, str, float]]) -> None:
    """Write a solo CSV from ``(device, kind, solo_throughput)`` rows (shortest round-trip
    decimals; throughputs positive)."""
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(SOLO_COLUMNS)
        for d, k, t in rows:
            w.writerow((d, k, repr(float(t))))


def _mean_by_key(keys: Iterable[tuple[str, ...]], values: Iterable[float]) -> dict[tuple[str, ...], float]:
    sums: dict[tuple[str, ...], list[float]] = {}
    for key, v in zip(keys, values, strict=True):
        sums.setdefault(key, []).append(float(v))
    # A single measurement is returned exactly (no division), repeats as their mean.
    return {k: (vs[0] if len(vs) == 1 else math.fsum(vs) / len(vs)) for k, vs in sums.items()}


def pair_table(data: ColocationData) -> dict[tuple[str, str, str], float]:
    """(lower-cased device, kind, partner) -> normalised throughput, repeats averaged."""
    keys = ((d.lower(), k, q) for d, k, q in zip(data.device, data.kind, data.partner, strict=True))
    return _mean_by_key(keys, data.y.tolist())  # type: ignore[return-value]


def solo_table(data: SoloData) -> dict[tuple[str, str], float]:
    """(lower-cased device, kind) -> solo throughput, repeats averaged."""
    keys = ((d.lower(), k) for d, k in zip(data.device, data.kind, strict=True))
    return _mean_by_key(keys, data.tput.tolist())  # type: ignore[return-value]
