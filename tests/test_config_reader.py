"""The one TOML config reader: a bad key in each kind of file (scenario, live cluster, service)
is a ConfigError naming the file, the key and its line; and where lines come from."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

from rlsched.config_reader import ConfigError, ConfigReader
from rlsched.scenarios.loader import ScenarioError, load_scenario
from rlsched.toml_lines import KeyLines
from runtime.cluster.config_io import load_live_cluster
from runtime.service.config import hash_token, load_service_config

SCENARIO = """\
name = "mini"

[[cluster.nodes]]
name = "gpu"
cpu_cores = 8
host_mem_gib = 32
gpu_model = "T4"

[[cluster.nodes]]
name = "cpu"
cpu_cores = -1
host_mem_gib = 16

[workload]
tasks = 20
apps = { matmul = 1 }
"""
LIVE = """\
device_concurrency = 1

[[nodes]]
name = "a"

[[nodes]]
name = "b"
[[nodes.gpus]]
model = "T4"
[[nodes.gpus]]
model = "T4"
mem_mib = -1
"""
SERVICE = f"""\
port = 8470

[[tenants]]
name = "a"
token_sha256 = "{hash_token("a")}"

[[tenants]]
name = "b"
token_sha256 = "{hash_token("b")}"
weight = 0
"""

CASES: list[tuple[str, str, Callable[[Path], object], str, type[ConfigError]]] = [
    (SCENARIO, "s.toml", lambda p: load_scenario(str(p)), "cluster.nodes[1].cpu_cores", ScenarioError),
    (LIVE, "live.toml", load_live_cluster, "nodes[1].gpus[1].mem_mib", ConfigError),
    (SERVICE, "service.toml", load_service_config, "tenants[1].weight", ConfigError),
]


@pytest.mark.parametrize(
    ("text", "name", "load", "field", "kind"), CASES, ids=["scenario", "live", "service"]
)
def test_a_bad_key_names_the_file_the_key_and_its_line(
    tmp_path: Path,
    text: str,
    name: str,
    load: Callable[[Path], object],
    field: str,
    kind: type[ConfigError],
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load(path)
    err = info.value
    assert type(err) is kind
    # The bad value is the last line that assigns the key (earlier tables have it right).
    key = field.rsplit(".", 1)[-1]
    line = max(i for i, s in enumerate(text.splitlines(), 1) if s.startswith(f"{key} ="))
    assert (err.path, err.field, err.line) == (str(path), field, line)
    assert str(err).startswith(f"{path}:{line}: {field}: expected ")
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


def test_a_missing_key_points_at_its_table_and_an_unknown_one_at_itself(tmp_path: Path) -> None:
    path = tmp_path / "live.toml"
    path.write_text("[[nodes]]\nname = 'a'\n\n[[nodes]]\ncolour = 'red'\n")
    with pytest.raises(ConfigError) as info:
        load_live_cluster(path)
    assert (info.value.field, info.value.line) == ("nodes[1].colour", 5)
    path.write_text("[[nodes]]\nname = 'a'\n\n[[nodes]]\ncpu_cores = 1\n")
    with pytest.raises(ConfigError) as info:
        load_live_cluster(path)
    assert (info.value.field, info.value.line) == ("nodes[1].name", 4)


def test_a_syntax_error_names_the_parsers_line(tmp_path: Path) -> None:
    path = tmp_path / "service.toml"
    path.write_text("port = 1\nhost = = 2\n")
    with pytest.raises(ConfigError) as info:
        load_service_config(path)
    assert (info.value.field, info.value.line) == ("<syntax>", 2)
    assert str(info.value).startswith(f"{path}:2: <syntax>: expected valid TOML")


def test_key_lines_follow_arrays_of_tables_inline_values_and_multi_line_strings() -> None:
    text = """\
# a comment = 1
title = "x"
text = '''
not_a_key = 1
[not.a.header]
'''
list = [
  [1, 2],
  "x = ]",
]
[cluster]
"quoted key" = 1
[[cluster.nodes]]
name = "a"
[[cluster.nodes]]
name = "b"
[[cluster.nodes.gpus]]
model = "T4"
apps = { "colo:A" = 1, b = 2 }
[dyn.drift]
sigma.inner = 0.1
"""
    lines = KeyLines(text)
    assert lines.find("title") == 2
    assert lines.find("not_a_key") is None and lines.find("not") is None
    assert lines.find("list") == 7
    assert lines.find("cluster") == 11
    assert lines.find("cluster.quoted key") == 12
    assert lines.find("cluster.nodes") == 13
    assert lines.find("cluster.nodes[1].name") == 16
    assert lines.find("cluster.nodes[1].gpus[0].model") == 18
    assert lines.find("cluster.nodes[1].gpus[0].apps.colo:A") == 19  # inside an inline table
    assert lines.find("cluster.nodes[0].cpu_cores") == 13  # missing: its table's header
    assert lines.find("dyn.drift.sigma.inner") == 21
    assert lines.find("dyn.drift.missing") == 20
    assert lines.find("elsewhere") is None
    assert lines.find("--rate") is None and lines.find("<file>") is None


def test_reader_bounds_and_messages() -> None:
    r = ConfigReader("c.toml", "a = 1\nb = 'x'\nc = 0.5\n")
    doc = {"a": 1, "b": "x", "c": 0.5}
    assert r.integer(doc, "", "a", ge=0, le=3) == 1
    assert r.integer(doc, "", "z", 7, ge=0) == 7
    with pytest.raises(ConfigError, match=r"^c.toml:1: a: expected an integer >= 2, got 1$"):
        r.integer(doc, "", "a", ge=2)
    with pytest.raises(ConfigError, match=r"^c.toml:3: c: expected a number > 0 and < 0.5, got 0.5$"):
        r.number(doc, "", "c", gt=0, lt=0.5)
    with pytest.raises(ConfigError, match=r'^c.toml:2: b: expected one of "local", "ray", got \'x\'$'):
        r.choice(doc, "", "b", ("local", "ray"))
    with pytest.raises(ConfigError, match=r"^c.toml: z: expected a string \(this key is required\)$"):
        r.string(doc, "", "z")
    with pytest.raises(ConfigError, match=r"^c.toml:2: b: expected one of the keys \(a, c\), got 'b'$"):
        r.keys(doc, "", ("a", "c"))
