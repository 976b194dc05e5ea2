"""``rlsched train``: behaviour-cloning pretraining from a heuristic teacher, then masked DQN.

The paper pretrains its MLP before DQN; here the teacher is a strong heuristic (``mct`` by
default): the Q-network first learns to rank nodes as the teacher does (cross-entropy over the
masked Q-values), then DQN improves on it with the environment's reward. Evaluation runs the
greedy network on held-out seeds through the same simulator and metrics as every baseline.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

from envs.gym_env import ClusterSchedulingEnv
from experiments.cloning import behaviour_clone, collect_teacher
from experiments.configs import TrainConfig
from experiments.train_entries import scenario_entries, validation_entries
from experiments.train_evaluation import (
    TEACHER_TRIALS,
    evaluate_all,
    evaluate_selector,
    pick_teacher,
    score,
)
from experiments.train_memory import available_bytes, check_replay_fits
from models.checkpoint import load_checkpoint, load_weights, save_checkpoint
from models.masked_dqn import MaskedDQN, MaskedDQNPolicy
from models.qnet import NodeScorer
from models.time_discount import TimeDiscountReplayBuffer
from rlsched.features import (
    CLUSTER_FEATURES,
    FEATURE_VERSION,
    NODE_FEATURES,
    READABLE_FEATURE_VERSIONS,
    TASK_FEATURES,
    network_feature_version,
)
from rlsched.policies.registry import make_selector
from rlsched.scenarios.spec import Scenario
from rlsched.seeds import VALIDATION, describe, training_seed


def dims() -> tuple[int, int, int]:
    """Feature sizes of this build: node, task, cluster."""
    return len(NODE_FEATURES), len(TASK_FEATURES), len(CLUSTER_FEATURES)


def training_scenarios(cfg: TrainConfig) -> list[Scenario]:
    """The scenarios of ``cfg.scenario`` (one entry, or several comma-separated).

    :raises ValueError: naming ``scenario`` when it lists none.
    :raises ScenarioError: for an entry that does not load.
    """
    from experiments.evaluation import load_entry

    return [load_entry(e, cfg.rate_per_min) for e in scenario_entries(cfg)]


def validation_scenarios(cfg: TrainConfig) -> list[Scenario]:
    """The scenarios whose validation runs choose ``best/``: ``cfg.validation_scenario``'s, or the
    training scenarios when it is ``None``."""
    from experiments.evaluation import load_entry

    if cfg.validation_scenario is None:
        return training_scenarios(cfg)
    return [load_entry(e, cfg.rate_per_min) for e in validation_entries(cfg)]


def _choosing(scenarios: list[Scenario], cfg: TrainConfig, what: str) -> Iterable[Scenario]:
    """``scenarios`` with a progress bar while ``--pretrain best`` runs every teacher on each
    (minutes on a generated set, silent before)."""
    return tqdm(
        scenarios, desc=f"choosing {what}", unit="scenario", disable=None if cfg.pretrain == "best" else True
    )


# ---- checkpoints -------------------------------------------------------------------------------
def checkpoint_meta(
    cfg: TrainConfig,
    steps: int,
    ev: dict[str, float] | None,
    bc_acc: float | None,
    version: int = FEATURE_VERSION,
) -> dict:
    n, t, c = dims()
    return {
        "feature_version": version,
        "node_dim": n,
        "task_dim": t,
        "cluster_dim": c,
        "net_arch": list(cfg.net_arch),
        "scenario": cfg.scenario,
        "seed": cfg.seed,
        "dqn_steps": steps,
        "config": asdict(cfg),
        "evaluation": ev,
        "bc_accuracy": bc_acc,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


class _Progress(BaseCallback):
    """tqdm bar over DQN steps showing the latest evaluation; evaluates and checkpoints."""

    def __init__(
        self,
        cfg: TrainConfig,
        scenarios: list[Scenario],
        refs: list[dict[str, float]],
        out: Path,
        bc_acc: float | None,
    ) -> None:
        super().__init__()
        self.cfg, self.scenarios, self.refs, self.out, self.bc_acc = cfg, scenarios, refs, out, bc_acc
        self.best = -np.inf
        self.history: list[dict[str, Any]] = []
        self.bar: tqdm | None = None
        self.offset = 0  # DQN steps done before this process (a resumed run)

    def resume_from(self, steps: int, history: list[dict[str, Any]]) -> None:
        """Continue a run: steps are counted from ``steps``, and earlier evaluations stay in the
        history and keep their claim on ``best/``."""
        self.offset = steps
        self.history = list(history)
        self.best = max((score(ev, self.cfg.objective) for ev in history), default=-np.inf)

    @property
    def steps(self) -> int:
        """DQN steps of the whole run, this process's and earlier ones."""
        return self.offset + self.num_timesteps

    def _on_training_start(self) -> None:
        self.bar = tqdm(total=self.cfg.steps, initial=self.offset, desc="DQN", unit="step", disable=None)
        if self.history:
            last = self.history[-1]
            self.bar.set_postfix(
                val_thr=f"{last['throughput_per_min']:.1f}/min", val_p95=f"{last['latency_p95_s']:.0f}s"
            )

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(1)
        if self.steps % self.cfg.eval_every == 0:
            self.evaluate_and_save()
        # --steps is the run's total: DQN collects train_freq steps at a time and would end up to
        # train_freq - 1 past it (a run resumed at 8,126 of 9,500 ended at 9,502).
        return self.steps < self.cfg.steps

    def evaluate_and_save(self) -> dict[str, Any]:
        scorer = self.model.q_net.scorer  # type: ignore[attr-defined]
        ev = evaluate_all(scorer, self.scenarios, self.cfg, self.refs, validation_entries(self.cfg))
        ev["step"] = float(self.steps)
        self.history.append(ev)
        if self.num_timesteps > 0:  # the logger exists once learn() has started
            self.logger.record("eval/throughput_per_min", ev["throughput_per_min"])
            self.logger.record("eval/latency_p95_s", ev["latency_p95_s"])
            self.logger.record("eval/relative_throughput", ev["relative_throughput"])
        meta = checkpoint_meta(self.cfg, self.steps, ev, self.bc_acc, network_feature_version(scorer))
        save_checkpoint(self.out / "last", scorer.state_dict(), meta)
        if score(ev, self.cfg.objective) > self.best:
            self.best = score(ev, self.cfg.objective)
            save_checkpoint(self.out / "best", scorer.state_dict(), meta)
        if self.bar is not None and not self.bar.disable:
            self.bar.set_postfix(
                val_thr=f"{ev['throughput_per_min']:.1f}/min",
                val_p95=f"{ev['latency_p95_s']:.0f}s",
                vs_ref=f"{ev['relative_throughput']:.3f}",
                **({"lat_vs_ref": f"{ev['relative_latency']:.3f}"} if "relative_latency" in ev else {}),
            )
        elif self.num_timesteps > 0:  # no bar (a log file): a line per evaluation, a sign of life
            print(
                f"DQN step {self.steps:,} of {self.cfg.steps:,}: validation {ev['throughput_per_min']:.1f} "
                f"tasks/min, p95 {ev['latency_p95_s']:.0f} s, {ev['relative_throughput']:.3f}x the reference",
                file=sys.stderr,
                flush=True,
            )
        # Atomic (temporary file, then rename): a kill mid-write must not lose the evaluations.
        tmp = self.out / "history.json.tmp"
        tmp.write_text(json.dumps(self.history, indent=1))
        os.replace(tmp, self.out / "history.json")
        return ev

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _earlier_history(path: Path, done: int) -> list[dict[str, Any]]:
    """Evaluations of the run being resumed, up to its ``done`` steps (none if ``path`` is not
    that run's history: another folder, or unreadable)."""
    try:
        history = json.loads(path.read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(history, list) or not all(isinstance(e, dict) and "step" in e for e in history):
        return []
    return [e for e in history if e["step"] <= done]


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by the user (Ctrl-C); the current weights were saved first.

    :param saved: the checkpoint directory holding them.
    :param steps: DQN steps done.
    """

    def __init__(self, saved: Path, steps: int) -> None:
        super().__init__(f"interrupted after {steps} DQN steps; weights saved in {saved}")
        self.saved, self.steps = saved, steps


def check_seed_sets(cfg: TrainConfig) -> None:
    """Refuse validation seeds outside the validation set (they would leak into a figure).

    :raises ValueError: naming ``eval_seeds`` and the seeds that are not validation seeds.
    """
    bad = [s for s in cfg.eval_seeds if s not in VALIDATION]
    if bad or not cfg.eval_seeds:
        span = f"{VALIDATION.start}-{VALIDATION.stop - 1}"
        raise ValueError(f"eval_seeds: expected validation seeds in {span}, got {bad or '[]'}")


def seed_sets(cfg: TrainConfig) -> dict[str, str]:
    """Where each figure of a training run comes from (printed and kept in ``summary.json``)."""
    first, last = training_seed(cfg.seed, 0), training_seed(cfg.seed, cfg.pretrain_episodes - 1)
    return {
        "training": f"episodes on training seeds (behaviour cloning: {first}-{last}; DQN: drawn from 0-9999)",
        "evaluations": f"{describe(cfg.eval_seeds)} seeds {', '.join(map(str, cfg.eval_seeds))} "
        "(choose best/; not test figures: rlsched evaluate reports those)",
    }


def build_dqn(env: gym.Env, cfg: TrainConfig, tensorboard_log: str | None = None) -> MaskedDQN:
    """The masked DQN of ``cfg`` on ``env`` (a simulated or a live scheduling environment).

    :param env: the environment.
    :param cfg: hyper-parameters and seed.
    :param tensorboard_log: TensorBoard folder, or ``None``.
    """
    smdp: dict[str, Any] = {}
    if cfg.n_steps != 1 and cfg.half_life_s is None:
        raise ValueError("n_steps: n-step returns need semi-MDP discounting (a half_life_s)")
    if cfg.half_life_s is not None:
        smdp = {
            "replay_buffer_class": TimeDiscountReplayBuffer,
            "replay_buffer_kwargs": {"half_life_s": cfg.half_life_s, "n_steps": cfg.n_steps},
        }
    return MaskedDQN(
        MaskedDQNPolicy,
        env,
        double_q=cfg.double_q,
        **smdp,
        learning_rate=cfg.learning_rate,
        buffer_size=cfg.buffer_size,
        batch_size=cfg.batch_size,
        gamma=cfg.gamma,
        learning_starts=cfg.learning_starts,
        target_update_interval=cfg.target_update_interval,
        train_freq=cfg.train_freq,
        exploration_fraction=cfg.exploration_fraction,
        exploration_initial_eps=cfg.exploration_initial_eps,
        exploration_final_eps=cfg.exploration_final_eps,
        policy_kwargs={"net_arch": list(cfg.net_arch)},
        seed=cfg.seed,
        verbose=0,
        tensorboard_log=tensorboard_log,
    )


def train(
    cfg: TrainConfig,
    out: str | Path,
    resume: str | Path | None = None,
    start_weights: str | Path | None = None,
) -> dict[str, Any]:
    """Run a full training; return a summary (evaluations before and after DQN).

    :param cfg: the configuration.
    :param out: output directory: ``pretrained/`` (before DQN), ``best/`` (best evaluation,
        cloned network included), ``last/``, ``history.json``, ``summary.json``, ``tb/``
        (TensorBoard: DQN loss, exploration rate, episode rewards, evaluations).
    :param resume: a checkpoint directory whose weights start this run (skips cloning). The run
        continues from the checkpoint's ``dqn_steps`` up to ``cfg.steps`` in all; when ``out``
        already holds that run's ``history.json``, its evaluations are kept and still compete for
        ``best/``. The replay buffer and the exploration schedule start afresh.
    :param start_weights: a checkpoint directory whose weights start a *new* run (skips cloning;
        steps count from 0, as fine-tuning on another scenario needs). Not with ``resume``.
    """
    if resume is not None and start_weights is not None:
        raise ValueError("resume and start_weights: give one, not both")
    check_seed_sets(cfg)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    # The network is small: one thread avoids synchronisation overhead that outweighs the gain.
    torch.set_num_threads(cfg.threads)
    scenarios = training_scenarios(cfg)
    check_replay_fits(scenarios, scenario_entries(cfg), min(cfg.steps, cfg.buffer_size), available_bytes())
    # A network keeps the feature version it was trained on: resuming or fine-tuning one of an
    # earlier version feeds it that version, and its checkpoints record it.
    origin = resume if resume is not None else start_weights
    first = load_checkpoint(origin, READABLE_FEATURE_VERSIONS, kind="ldwp") if origin is not None else None
    version = int(first[1]["feature_version"]) if first is not None else FEATURE_VERSION
    env = ClusterSchedulingEnv(scenarios, placer=cfg.placer, feature_version=version)
    model = build_dqn(env, cfg, tensorboard_log=str(out / "tb"))
    scorer: NodeScorer = model.q_net.scorer  # type: ignore[assignment]
    scorer.feature_version = version
    bc_acc = None
    done, history = 0, []
    if resume is not None and first is not None:
        state, resumed = first
        load_weights(scorer, state, resume)
        done, bc_acc = int(resumed.get("dqn_steps") or 0), resumed.get("bc_accuracy")
        history = _earlier_history(out / "history.json", done)
    elif start_weights is not None and first is not None:
        state, source = first
        load_weights(scorer, state, start_weights)
        bc_acc = source.get("bc_accuracy")
    elif cfg.pretrain:
        trials = [
            training_seed(cfg.seed, cfg.pretrain_episodes * len(scenarios) + i) for i in range(TEACHER_TRIALS)
        ]
        teachers = [pick_teacher(sc, cfg, trials) for sc in _choosing(scenarios, cfg, "teachers")]
        data = collect_teacher(cfg, scenarios, teachers)
        bc_acc = behaviour_clone(scorer, data, cfg)
    model.q_net_target.scorer.load_state_dict(scorer.state_dict())  # type: ignore[union-attr]
    checks = validation_scenarios(cfg)
    references = [pick_teacher(sc, cfg, list(cfg.eval_seeds)) for sc in _choosing(checks, cfg, "references")]
    refs = [evaluate_selector(make_selector(r), sc, cfg) for r, sc in zip(references, checks, strict=True)]
    cb = _Progress(cfg, checks, refs, out, bc_acc)
    cb.model = model  # lets evaluate_and_save run before learn()
    cb.resume_from(done, history)
    # The cloned (or resumed) network competes for best/; resumed weights that were evaluated when
    # they were saved are not evaluated twice.
    evaluated = bool(history) and history[-1]["step"] == done
    start = history[-1] if evaluated else cb.evaluate_and_save()
    if resume is None and start_weights is None:
        meta = checkpoint_meta(cfg, 0, start, bc_acc, version)
        save_checkpoint(out / "pretrained", scorer.state_dict(), meta)
    if cfg.steps > done:
        try:
            model.learn(total_timesteps=cfg.steps - done, callback=cb)
        except KeyboardInterrupt:
            # Keep what was learnt since the last evaluation: last/ gets the current weights
            # (not evaluated), best/ and history.json stay as the evaluations left them.
            meta = checkpoint_meta(cfg, cb.steps, None, bc_acc, version)
            save_checkpoint(out / "last", scorer.state_dict(), meta)
            raise TrainingInterrupted(out / "last", cb.steps) from None
    last = cb.history[-1]
    final = last if last["step"] == cb.steps else cb.evaluate_and_save()
    summary = {
        "seed_sets": seed_sets(cfg),
        "reference": {
            "selector": references[0] if len(set(references)) == 1 else "per scenario",
            **{
                e: {"selector": r, **figures}
                for e, r, figures in zip(validation_entries(cfg), references, refs, strict=True)
            },
        },
        "before_dqn": start,
        "started_from": "resumed"
        if resume is not None
        else "weights"
        if start_weights is not None
        else "cloned",
        "after_dqn": final,
        "bc_accuracy": bc_acc,
        "best": cb.history,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary
