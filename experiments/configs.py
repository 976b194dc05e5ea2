"""The configurations of the workflows users run, and the one place their defaults are written.

The CLI (``experiments.cli``) reads every default of its flags off these dataclasses (see
:func:`rlsched.defaults.default`), so a default changed here changes the flag, its ``--help``
and the Python API together. The module imports nothing heavy: the CLI builds its parser from it at start-up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from rlsched.defaults import default
from rlsched.seeds import DEFAULT_VALIDATION, VALIDATION
from runtime.cluster.workload_spec import LiveWorkload


@dataclass
class TrainConfig:
    """Everything that defines a training run (recorded in every checkpoint).

    :param scenario: built-in name or path, or several comma-separated entries
        ``NAME[@RATE][#TASKS]`` to train one network on all of them (each episode draws one;
        ``best/`` is chosen on the mean, over scenarios, of throughput relative to the teacher).
    :param rate_per_min: arrival-rate override for entries without ``@RATE`` (``None`` = each
        scenario's own).
    :param steps: DQN environment steps in all (a resumed checkpoint's own DQN steps count).
    :param seed: seeds torch, numpy and the training episodes.
    :param pretrain: teacher selector for behaviour cloning, ``"best"`` (on each scenario the
        heuristic of ``experiments.train_evaluation.TEACHERS`` with the highest throughput on training seeds
        teaches, and on each validation scenario the best of them on the validation seeds is the
        reference ``best/`` is measured against), or ``None`` to skip.
    :param pretrain_episodes: teacher episodes collected for cloning.
    :param bc_epochs: passes over the cloning data.
    :param net_arch: hidden sizes of the node scorer (the paper's 256, 128).
    :param placer: stage-2 policy inside the environment.
    :param eval_seeds: validation seeds: every evaluation during training, and so the choice of
        ``best/``, uses these (never trained on, never reported as test figures; ``rlsched.seeds``).
    :param validation_scenario: entries (as ``scenario``) whose runs on ``eval_seeds`` choose
        ``best/``; ``None``: the training entries. Cases training never sees choose a network for
        cases it has not seen.
    :param eval_every: DQN steps between evaluations.
    :param half_life_s: semi-MDP discounting: a reward ``dt`` simulated seconds later counts
        ``0.5 ** (dt / half_life_s)`` (:mod:`models.time_discount`); ``None`` = the per-decision
        ``gamma``. The default, 30 s, is about the run time of one of ``paper``'s tasks (5-35 s):
        chosen from the workload, not tuned.
    :param double_q: double DQN targets.
    :param objective: what ``best/`` is chosen on: ``"throughput"`` (throughput relative to the
        reference selector, p95 as tie-break) or ``"latency"`` (mean latency relative to the
        reference, with a guard on throughput). The reward is the environment's time in system
        (Decima's form, semi-MDP discounted) either way.
    :param n_steps: decisions per return (n-step targets, semi-MDP discounted; needs
        ``half_life_s``); 1 = one-step targets.
    """

    scenario: str = "paper"
    rate_per_min: float | None = None
    steps: int = 20_000
    seed: int = 0
    pretrain: str | None = "mct-mem"
    pretrain_episodes: int = 4
    bc_epochs: int = 8
    net_arch: tuple[int, ...] = (256, 128)
    placer: str = "speedup"
    eval_seeds: tuple[int, ...] = DEFAULT_VALIDATION
    validation_scenario: str | None = None
    eval_every: int = 5_000
    # With the dueling Q-network (models.qnet) the long-horizon value sits in V and TD learning
    # leaves the cloned ranking alone at an ordinary rate: on alibaba-dense (validation seeds)
    # lr 1e-4 rose from 721 to 809 tasks/min in 20k steps and 3e-4 to 812, where without the
    # dueling head 1e-4 fell from 739 to 208-543 and 1e-5 stayed at 709-743.
    learning_rate: float = 1e-4
    buffer_size: int = 50_000
    batch_size: int = 64
    gamma: float = 0.9
    half_life_s: float | None = 30.0
    double_q: bool = True
    n_steps: int = 1
    objective: str = "throughput"
    learning_starts: int = 1_000
    target_update_interval: int = 2_000
    train_freq: int = 4
    exploration_fraction: float = 0.2
    exploration_initial_eps: float = 0.05
    exploration_final_eps: float = 0.01
    threads: int = 1
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class PlacerTrainConfig:
    """Everything that defines a stage-2 training run (recorded in every checkpoint).

    :param scenarios: comma-separated entries ``NAME[@RATE][#TASKS]`` the placer trains on; the
        defaults are the built-ins where the placer decides throughput (saturated GPUs),
        shortened to 2,000 tasks. (At 1,000 the queues of a full run never built, and the rule
        trained there lost to ``iawp-pass`` on full-size validation runs.)
    :param rate_per_min: arrival-rate override for entries without ``@RATE``.
    :param selector: stage-1 policy during training (``ldwp`` reads ``selector_model``).
    :param selector_model: LDWP checkpoint for ``selector = "ldwp"`` (``None`` = shipped).
    :param iterations: random-search iterations.
    :param directions: perturbations per iteration (each runs twice, + and -).
    :param top: directions used in the update (the ones whose returns differ most).
    :param noise: standard deviation of a perturbation, in parameter units.
    :param step_size: update length, in parameter units per unit of normalised return.
    :param seeds_per_iteration: training seeds each perturbation runs on (the same for all).
    :param eval_seeds: validation seeds that select ``best/``.
    :param eval_every: iterations between evaluations (and after the last).
    :param seed: seeds the perturbations and the training episodes.
    :param jobs: worker processes.
    """

    scenarios: str = "interference-saturated#2000,hetero-saturated#2000"
    rate_per_min: float | None = None
    selector: str = "mct"
    selector_model: str | None = None
    iterations: int = 12
    directions: int = 4
    top: int = 2
    noise: float = 0.1
    step_size: float = 0.05
    seeds_per_iteration: int = 1
    eval_seeds: tuple[int, ...] = DEFAULT_VALIDATION
    eval_every: int = 3
    seed: int = 0
    jobs: int = 2

    def entries(self) -> list[str]:
        """The scenario entries, stripped."""
        return [e.strip() for e in self.scenarios.split(",") if e.strip()]

    def check(self) -> None:
        """Refuse settings that cannot train, naming the field.

        :raises ValueError: on the first bad field.
        """
        if not self.entries():
            raise ValueError("scenarios: at least one scenario entry is needed")
        for name in ("iterations", "directions", "top", "seeds_per_iteration", "eval_every", "jobs"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.top > self.directions:
            raise ValueError(f"top: must be at most directions ({self.directions}), got {self.top}")
        for name in ("noise", "step_size"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name}: must be a positive number, got {v}")
        bad = [s for s in self.eval_seeds if s not in VALIDATION]
        if bad or not self.eval_seeds:
            raise ValueError(
                f"eval_seeds: must be non-empty validation seeds (10000-19999), got {bad or '[]'}"
            )


@dataclass(frozen=True)
class LiveFinetuneConfig:
    """What ``finetune --live`` runs.

    :param steps: DQN steps (one step = one live task decision).
    :param seed: training seed.
    :param cluster_backend: ``local`` (in-process agents) or ``ray`` (one agent per Ray node).
    :param device_backend: ``numpy``, ``cupy`` or ``None`` (automatic).
    :param tasks_per_episode: live tasks per training episode.
    :param rate_per_s: task arrival rate of training and evaluation workloads.
    :param eval_seeds: held-out workload seeds for evaluation.
    :param eval_tasks: tasks per evaluation run.
    :param placer: stage 2 during training and evaluation.
    :param profile_fraction: share of (device, kind, partner) triples the live profiler measures.
    :param progress: show progress bars (profiling, every live run, DQN steps).
    """

    steps: int = 300
    seed: int = 0
    cluster_backend: str = "local"
    device_backend: str | None = None
    tasks_per_episode: int = 60
    rate_per_s: float = 40.0
    eval_seeds: tuple[int, ...] = (10_001, 10_002)
    eval_tasks: int = 120
    placer: str = "mlsm"
    profile_fraction: float = 1.0
    progress: bool = False

    def __post_init__(self) -> None:
        if self.cluster_backend not in ("local", "ray"):
            raise ValueError(f"backend must be 'local' or 'ray', got {self.cluster_backend!r}")
        for name, ok in (
            ("steps", self.steps >= 0),
            ("tasks_per_episode", self.tasks_per_episode >= 1),
            ("eval_tasks", self.eval_tasks >= 1),
            ("rate_per_s", self.rate_per_s > 0),
        ):
            if not ok:
                limit = ">= 0" if name == "steps" else "positive"
                raise ValueError(f"{name} must be {limit}, got {getattr(self, name)!r}")
        from rlsched.policies.registry import placer_names  # numpy-heavy: not at CLI start-up

        if self.placer not in placer_names():
            raise ValueError(f"unknown placer {self.placer!r}; known: {', '.join(placer_names())}")


@dataclass(frozen=True)
class FinetuneConfig:
    """Fine-tuning a trained LDWP network on a simulated target scenario (``rlsched finetune``).

    :param steps: DQN steps on the target.
    :param seed: training seed.
    """

    steps: int = 10_000
    seed: int = 0


@dataclass
class EvalConfig:
    """An evaluation.

    :param scenarios: built-in names or scenario files.
    :param schedulers: ``SELECTOR[+PLACER]`` specs.
    :param seeds: the seeds every scheduler runs.
    :param rate: arrival-rate override, tasks/min (``None``: each scenario's own).
    :param model: LDWP checkpoint for ``ldwp`` (``None``: shipped weights).
    :param placer_model: placer checkpoint for ``iawp-rl`` (``None``: shipped parameters).
    :param recogniser: the ``auto`` scheduler's recogniser folder (``None``: shipped).
    :param jobs: worker processes.
    :param timeout_s: wall-time limit of one run.
    :param runs: training or fine-tuning run folders (``history.json``) whose curves to plot.
    :param title: the report's title.
    :param command: the command line, printed in every report.
    :param suite: the suite it came from, if any.
    :param convergence_steps: with ``suite == "paper"`` and no ``runs``: DQN steps of each of the
        two training runs (with and without pretraining) whose curves the report shows; 0 skips.
    :param loads: offered loads to run each scenario at (``experiments/load_curves.py``); empty:
        each scenario at its own rate.
    :param load_of: what ``loads`` are relative to: ``"bound"`` or a ``SELECTOR+PLACER`` spec.
    :param rebalance: move tasks that have not started off nodes that stay overloaded or to idle GPU nodes, as
        ``rlsched serve`` does (``envs/rebalancing.py``).
    :param resume: keep the runs an earlier evaluation left in the output folder that are runs of
        this one (``experiments/evaluate_resume.py``) and run the rest; without it, a folder
        holding an evaluation is refused.
    """

    scenarios: list[str]
    schedulers: list[str]
    seeds: list[int]
    rate: float | None = None
    model: str | None = None
    placer_model: str | None = None
    recogniser: str | None = None
    jobs: int = 1
    timeout_s: float = 600.0
    runs: dict[str, str] = field(default_factory=dict)
    title: str = "rlsched evaluation"
    command: str = "rlsched evaluate"
    suite: str | None = None
    convergence_steps: int = 20_000
    loads: tuple[float, ...] = ()
    load_of: str = "bound"
    rebalance: bool = False
    resume: bool = False


@dataclass(frozen=True)
class DemoConfig:
    """``rlsched demo`` in the simulator and on the live runtime (``--live``).

    :param seeds: simulated seeds.
    :param paper_rate_per_min: arrival rate on ``paper`` (the paper's busiest); other scenarios
        keep their own.
    :param live_seeds: live seeds.
    :param live_tasks: live tasks per run.
    :param live_streams: live video streams.
    :param live_rate_per_min: live arrival rate.
    """

    seeds: int = 3
    paper_rate_per_min: float = 60.0
    live_seeds: int = 2
    # The live workload's own defaults (runtime.cluster.workload_spec.LiveWorkload), written there.
    live_tasks: int = default(LiveWorkload, "tasks")
    live_streams: int = default(LiveWorkload, "streams")
    live_rate_per_min: float = 60.0 * default(LiveWorkload, "rate_per_s")


__all__ = [
    "DemoConfig",
    "EvalConfig",
    "FinetuneConfig",
    "LiveFinetuneConfig",
    "PlacerTrainConfig",
    "TrainConfig",
    "default",
]
