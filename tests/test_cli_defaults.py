"""Each default is written once: the CLI's flags read theirs off the config dataclasses."""

from __future__ import annotations

from experiments.cli import _parser
from experiments.configs import (
    DemoConfig,
    EvalConfig,
    FinetuneConfig,
    LiveFinetuneConfig,
    TrainConfig,
    default,
)
from experiments.live_demo import LiveDemoConfig
from runtime.cluster.workload import LiveWorkload


def test_train_flags_default_to_the_train_config() -> None:
    a = _parser().parse_args(["train", "--out", "x"])
    cfg = TrainConfig()
    assert (a.steps, a.seed, a.pretrain, a.half_life, a.n_steps, a.double_q, a.learning_rate) == (
        cfg.steps,
        cfg.seed,
        cfg.pretrain,
        cfg.half_life_s,
        cfg.n_steps,
        cfg.double_q,
        cfg.learning_rate,
    )


def test_finetune_and_evaluate_flags_default_to_their_configs() -> None:
    f = _parser().parse_args(["finetune", "--from", "m", "--out", "x"])
    live = LiveFinetuneConfig()
    assert f.seed == FinetuneConfig().seed
    assert (f.backend, f.tasks, f.eval_tasks) == (
        live.cluster_backend,
        live.tasks_per_episode,
        live.eval_tasks,
    )
    e = _parser().parse_args(["evaluate", "--out", "x"])
    assert (e.timeout, e.convergence_steps) == (
        default(EvalConfig, "timeout_s"),
        EvalConfig([], [], []).convergence_steps,
    )


def test_live_demo_defaults_are_the_live_workload_and_the_demo_config() -> None:
    d = _parser().parse_args(["demo", "--live"])
    w = LiveWorkload()
    assert (d.tasks, d.streams) == (w.tasks, w.streams)
    assert DemoConfig().live_rate_per_min == 60.0 * w.rate_per_s
    assert len(LiveDemoConfig().seeds) == DemoConfig().live_seeds


def test_default_names_a_missing_field() -> None:
    import pytest

    with pytest.raises(KeyError, match="no field 'nope'"):
        default(TrainConfig, "nope")
    with pytest.raises(KeyError, match="has no default"):
        default(EvalConfig, "scenarios")
