"""Each flag is written once: a field of its command's options, its default read off the config
dataclasses, its help from the field's docstring line."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass

import pytest

from experiments.commands import COMMANDS, parse, parser
from experiments.commands.flags import add_flags, field_help, flag, pick
from experiments.commands.train import _stage2_config
from experiments.configs import (
    DemoConfig,
    EvalConfig,
    FinetuneConfig,
    LiveFinetuneConfig,
    PlacerTrainConfig,
    TrainConfig,
    default,
)
from experiments.live_demo import LiveDemoConfig
from runtime.cluster.workload import LiveWorkload
from tests.conftest import cli_in_a_fresh_interpreter


def test_train_flags_default_to_the_train_config() -> None:
    _, a = parse(["train", "--out", "x"])
    cfg = TrainConfig()
    assert (a.steps, a.seed, a.pretrain, a.half_life_s, a.n_steps, a.double_q, a.learning_rate) == (
        cfg.steps,
        cfg.seed,
        cfg.pretrain,
        cfg.half_life_s,
        cfg.n_steps,
        cfg.double_q,
        cfg.learning_rate,
    )
    # The options become the config by field name; nothing is re-assembled by hand.
    assert TrainConfig(**pick(TrainConfig, a, scenario="paper")) == TrainConfig()
    assert _stage2_config(a, "mct", None) == PlacerTrainConfig()


def test_finetune_and_evaluate_flags_default_to_their_configs() -> None:
    _, f = parse(["finetune", "--from", "m", "--out", "x"])
    live = LiveFinetuneConfig()
    assert f.seed == FinetuneConfig().seed
    assert (f.backend, f.tasks, f.eval_tasks) == (
        live.cluster_backend,
        live.tasks_per_episode,
        live.eval_tasks,
    )
    _, e = parse(["evaluate", "--out", "x"])
    assert (e.timeout_s, e.convergence_steps) == (
        default(EvalConfig, "timeout_s"),
        EvalConfig([], [], []).convergence_steps,
    )


def test_live_demo_defaults_are_the_live_workload_and_the_demo_config() -> None:
    _, d = parse(["demo", "--live"])
    w = LiveWorkload()
    assert (d.tasks, d.streams) == (w.tasks, w.streams)
    assert DemoConfig().live_rate_per_min == 60.0 * w.rate_per_s
    assert len(LiveDemoConfig().seeds) == DemoConfig().live_seeds


def test_default_names_a_missing_field() -> None:
    with pytest.raises(KeyError, match="no field 'nope'"):
        default(TrainConfig, "nope")
    with pytest.raises(KeyError, match="has no default"):
        default(EvalConfig, "scenarios")


def _all(commands: tuple = COMMANDS) -> list:
    out = []
    for c in commands:
        out += ([c] if c.run else []) + _all(c.actions)
    return out


def test_every_flag_has_its_help_from_the_docstring_and_every_command_runs_from_the_table() -> None:
    p = parser()
    for cmd in _all():
        helps = field_help(cmd.options)
        for f in dataclasses.fields(cmd.options):
            assert helps.get(f.name), (cmd.name, f.name)
        assert callable(cmd.run)
    text = p.format_help()
    for cmd in COMMANDS:
        assert cmd.name in text


def test_an_undocumented_field_is_refused() -> None:
    @dataclass(kw_only=True)
    class Opts:
        """Options.

        :param documented: it says what it is
            over two lines
        """

        documented: int = 3
        silent: str = flag("x", name="--quiet-one")

    assert field_help(Opts) == {"documented": "it says what it is over two lines"}
    with pytest.raises(TypeError, match=r"Opts.silent: no ':param silent:'"):
        add_flags(argparse.ArgumentParser(), Opts)


def test_flags_parse_into_the_options_with_their_spelling() -> None:
    _, a = parse(["train", "--out", "o", "--rate", "30", "--half-life", "0", "--no-double-q", "--stage", "2"])
    assert (a.rate_per_min, a.half_life_s, a.double_q, a.stage) == (30.0, 0.0, False, "2")
    _, i = parse(["interference", "fit", "--data", "a.csv", "--data", "b.csv", "--out", "m"])
    assert i.data == ["a.csv", "b.csv"] and i.method == "ncf"
    _, s = parse(["status", "17", "--json"])
    assert (s.ids, s.json, s.url) == ([17], True, None)  # None: $RLSCHED_URL, else the default
    assert parse(["status", "17", "4", "9"])[1].ids == [17, 4, 9]  # one or more ids
    _, u = parse(["submit", "--app", "fft", "--key", "job-7", "--deadline", "30", "--retry-for", "0"])
    assert (u.key, u.deadline, u.retry_for) == ("job-7", 30.0, 0.0)
    assert parse(["submit", "--app", "fft"])[1].retry_for == 60.0
    assert parse(["status", "--key", "job-7"])[1].key == "job-7"
    for bad in (
        ["status", "0"],
        ["submit", "--app", "fft", "--chunks", "100001"],
        ["submit", "--app", "fft", "--key", "a/b"],
        ["submit", "--app", "fft", "--key", "x" * 121],
    ):
        with pytest.raises(SystemExit):
            parse(bad)
    with pytest.raises(SystemExit):
        parse(["train", "--out", "o", "--steps", "-1"])


def test_the_parser_is_built_without_heavy_imports() -> None:
    """``rlsched --help`` (and every command's parser, built at start) imports neither numpy,
    torch, httpx nor the policy registry: each command's options read only light modules, so a
    command starts in ~0.1 s. A command's own work imports what it needs."""
    heavy = ("numpy", "torch", "httpx", "scipy", "rlsched.policies.registry", "runtime.cluster.workload")
    rc, loaded, err = cli_in_a_fresh_interpreter(["--help"], heavy)
    assert rc == 0, err
    assert loaded == [], loaded
