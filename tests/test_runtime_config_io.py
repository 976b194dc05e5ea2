"""Live cluster files: what they build, and errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cli import main
from rlsched.config_reader import ConfigError
from runtime.cluster.config import default_live_cluster
from runtime.cluster.config_io import dump_live_cluster, load_live_cluster, write_live_cluster

GOOD = """
device_concurrency = 1
max_streams_per_gpu = 6
emulate_core_speed = true

[[nodes]]
name = "box"
count = 2
cpu_cores = 1
[[nodes.gpus]]
model = "V100M16"
mem_mib = 256
[[nodes.gpus]]
model = "P4"
speed = 2.0

[[nodes]]
name = "cpu-only"
cpu_cores = 3
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "live.toml"
    p.write_text(text)
    return p


def test_a_file_builds_the_cluster(tmp_path: Path) -> None:
    spec = load_live_cluster(write(tmp_path, GOOD))
    assert [n.name for n in spec.nodes] == ["box-0", "box-1", "cpu-only"]
    box = spec.nodes[0]
    assert [g.model for g in box.gpus] == ["V100M16", "P4"] and [g.index for g in box.gpus] == [0, 1]
    assert box.gpus[0].mem_bytes == 256 << 20 and box.gpus[1].rel_speed == 2.0
    assert spec.device_concurrency == 1 and spec.max_streams_per_gpu == 6 and spec.nodes[2].gpus == ()
    assert spec.emulate_core_speed and spec.fastest_gpu == box.gpus[0]
    assert spec.view().gpu_mem_mb[0, 0] == 256.0  # placers see the runtime's capacity


def test_round_trips_write_then_read_equal(tmp_path: Path) -> None:
    """The writer is the reader's inverse: the embedded cluster and a file's cluster come back equal."""
    for spec in (default_live_cluster(), load_live_cluster(write(tmp_path, GOOD))):
        write_live_cluster(spec, tmp_path / "out.toml")
        back = load_live_cluster(tmp_path / "out.toml")
        assert back == spec
        assert dump_live_cluster(back) == (tmp_path / "out.toml").read_text()


def test_a_name_that_needs_quoting_round_trips(tmp_path: Path) -> None:
    spec = load_live_cluster(write(tmp_path, '[[nodes]]\nname = "rack \\"7\\" ünïcode"\n'))
    write_live_cluster(spec, tmp_path / "out.toml")
    assert load_live_cluster(tmp_path / "out.toml").nodes[0].name == 'rack "7" ünïcode'


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("[[nodes]]\nname = 'a'\ncpu_cores = 'two'\n", "nodes[0].cpu_cores"),
        ("[[nodes]]\nname = 'a'\n[[nodes.gpus]]\nmodel = 'GTX9000'\n", "nodes[0].gpus[0].model"),
        ("[[nodes]]\nname = 'a'\n[[nodes.gpus]]\nmodel = 'T4'\nmem_mib = -1\n", "nodes[0].gpus[0].mem_mib"),
        ("[[nodes]]\nname = 'a'\ncolour = 'red'\n", "nodes[0].colour"),
        ("[[nodes]]\nname = 'a'\n[[nodes]]\nname = 'a'\n", "nodes"),
        ("[[nodes]]\nname = 'a'\ncpu_cores = 0\n", "nodes[0].cpu_cores"),
        ("device_concurrency = 1\n", "nodes"),
        ("emulate_core_speed = 'yes'\n[[nodes]]\nname = 'a'\n", "emulate_core_speed"),
        ("nodes = [\n", "<syntax>"),
        ("[[nodes]]\nname = 'a'\ncount = 1000000000\n", "nodes[0].count"),
        ("[[nodes]]\nname = 'a'\ncount = 200\n[[nodes]]\nname = 'b'\ncount = 100\n", "nodes"),
        ("[[nodes]]\nname = 'a'\nstreams_per_gpu = 65\n", "nodes[0].streams_per_gpu"),
        ("[[nodes]]\nname = 'a'\n[[nodes.gpus]]\nmodel = 'T4'\nspeed = 1e300\n", "nodes[0].gpus[0].speed"),
        ("[[nodes]]\nname = 'a'\nhost_mem_gib = 1e9\n", "nodes[0].host_mem_gib"),
    ],
)
def test_errors_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_live_cluster(write(tmp_path, text))
    assert e.value.field == field and str(tmp_path) in str(e.value)


def test_cli_uses_the_file_and_reports_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path, GOOD)
    args = ["demo", "--live", "--tasks", "8", "--seeds", "1", "--schedulers", "mct+mlsm", "--cluster"]
    assert main([*args, str(good)]) == 0
    out = capsys.readouterr().out
    assert "| box-1 | 1 | P4 |" in out
    bad = tmp_path / "bad.toml"
    bad.write_text("[[nodes]]\nname = 'a'\n[[nodes.gpus]]\nmodel = 'GTX9000'\n")
    assert main([*args, str(bad)]) == 2
    err = capsys.readouterr().err
    assert "nodes[0].gpus[0].model: expected a GPU model of the catalog (P4, K80, " in err, err  # names them
