"""Every kind of bad-input error has the one documented shape and survives pickling (Ray and worker
processes send errors back as pickles)."""

from __future__ import annotations

import pickle
import re

import pytest

from experiments.evaluate import EvaluateError
from models.checkpoint import CheckpointError
from rlsched.config_reader import ConfigError
from rlsched.errors import NOTHING, InputError, Unavailable
from rlsched.footprint import RunTooLarge
from rlsched.interference.measurements import MeasurementError
from rlsched.scenarios.loader import ScenarioError
from rlsched.scenarios.traces import TraceError
from rlsched.textfile import TextFileError

#: README "Exit codes": SOURCE[:LINE]: FIELD: expected WHAT[, got VALUE][; HINT], one line.
SHAPE = re.compile(r"(?P<source>[^:\n]+)(?::(?P<line>\d+))?: (?P<field>[^\n]+?): expected \S[^\n]*")

ERRORS = [
    InputError("--scheduler", "selector", "a known selector (mct, ...)", "nope"),
    InputError("x.toml", "workload.tasks", "an integer", "many\nlines", hint="see docs/scenarios.md"),
    ScenarioError("x.toml", "<syntax>", "valid TOML", line=3),
    ConfigError("live.toml", "nodes[0].cpu_cores", "an integer from 0 to 1,024", -1, line=4),
    TextFileError("x.csv", 12, 0xFF),
    MeasurementError("c.csv", 3, "norm_throughput", "a number in [0, 2]", "fast"),
    MeasurementError("c.csv", 0, "", "at least one data row"),
    TraceError("pods.csv", 4, "gpu_spec", "GPU model names", "X100"),
    RunTooLarge("x.toml", "workload.tasks", "at most ~10 tasks", 10**6, hint="lower workload.tasks"),
    EvaluateError("--runs", "value", "NAME=DIR", "x"),
]


@pytest.mark.parametrize("err", ERRORS, ids=lambda e: type(e).__name__)
def test_every_input_error_is_one_line_of_the_shape_and_pickles(err: InputError) -> None:
    m = SHAPE.fullmatch(str(err))
    assert m is not None, str(err)
    assert (m["source"], m["field"]) == (err.source, err.field)
    config_line = err.line if isinstance(err, ConfigError) else None  # a CSV's line is in FIELD
    assert m["line"] == (None if config_line is None else str(config_line))
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert (back.got is NOTHING) == (err.got is NOTHING)


def test_a_checkpoint_error_maps_to_the_same_input_error_naming_the_flag() -> None:
    e = CheckpointError("ck/meta.json", "feature_version", "2", 1, hint="retrain")
    assert str(e) == "ck/meta.json: feature_version: expected 2, got 1; retrain"
    assert str(pickle.loads(pickle.dumps(e))) == str(e)
    mapped = InputError.from_checkpoint(e, "--model")
    assert (
        str(mapped) == "ck/meta.json: feature_version: expected 2, got 1; retrain; the checkpoint of --model"
    )
    bare = InputError.from_checkpoint(CheckpointError("ck/weights.pt", "<file>", "a weights file"))
    assert str(bare) == "ck/weights.pt: <file>: expected a weights file" and bare.got is NOTHING


def test_unavailable_is_not_bad_input() -> None:
    e = Unavailable("--backend cupy", "the cupy backend cannot run here: no CUDA device")
    assert not isinstance(e, (InputError, ValueError))
    assert str(pickle.loads(pickle.dumps(e))) == str(e)
