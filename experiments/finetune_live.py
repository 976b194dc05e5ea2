"""``rlsched finetune --live``: carry the simulator-trained models to the live runtime.

Two transfers, each measured before and after on the live machine:

1. **Interference (IAWP).** An NCF model is fitted on the simulator's profiler for the live
   cluster's GPU models and the video kinds (pretraining in simulation), scored on measured
   co-location rows of the live profiler it never saw, then updated online (SGD) with the
   other half of the live rows and scored again on the same held-out rows.
2. **Node selection (LDWP).** The trained Q-network runs zero-shot on live workloads next to
   ``mct``; then masked DQN continues from its weights on the live Gymnasium environment (real
   executions), and the fine-tuned network is evaluated on the same held-out workload seeds.

Outputs in ``--out``: ``last/`` (the fine-tuned network, checksummed), ``interference/`` (the
updated model), ``colocation.csv`` (the live measurements) and ``transfer.json`` (every figure).
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

from envs.simulated_instrument import SimulatedProfiler
from envs.simulator import Simulator
from experiments.configs import LiveFinetuneConfig, TrainConfig
from experiments.report_stats import sample_std
from experiments.train import build_dqn
from experiments.train_evaluation import GreedySelector
from models.checkpoint import save_checkpoint
from models.qnet import NodeScorer
from rlsched.features import network_feature_version
from rlsched.interference.predictor import ColocationData, evaluate, fit_interference
from rlsched.policies.registry import make_placer
from rlsched.policies.selectors import MctSelector
from rlsched.scenarios.spec import Scenario, WorkloadSpec
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.scheduler import NodeSelector, TwoStageScheduler
from rlsched.scorer_io import scorer_from_checkpoint
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.config import LiveClusterSpec, default_live_cluster
from runtime.cluster.gym_env import LiveSchedulingEnv
from runtime.cluster.live import LiveOptions, run_live
from runtime.cluster.local import LocalCluster
from runtime.cluster.workload import VIDEO_APPS, LiveWorkload, build_work
from runtime.profiler import LiveProfiler


def cluster_factory(spec: LiveClusterSpec, cfg: LiveFinetuneConfig) -> Callable[[], ClusterBackend]:
    """Fresh cluster backends for episodes (Ray: connects to or starts a local Ray first)."""
    if cfg.cluster_backend == "local":
        return lambda: LocalCluster(spec, cfg.device_backend)
    import ray

    from runtime.cluster.ray_address import ray_init
    from runtime.cluster.ray_cluster import RayCluster

    started_here = not ray.is_initialized()
    if started_here:
        ray_init(None, "RAY_ADDRESS", include_dashboard=False, log_to_driver=False)
    # Connected by this call (RAY_ADDRESS or a new local instance): agents may share Ray nodes when
    # there are fewer of them than live nodes; a caller's own ray.init keeps one agent per node.
    return lambda: RayCluster(
        spec, backend=cfg.device_backend, share_nodes=started_here
    )  # None: each node chooses


def evaluate_live(
    selector: NodeSelector, spec: LiveClusterSpec, cfg: LiveFinetuneConfig, make: Callable[[], ClusterBackend]
) -> dict[str, float]:
    """Mean throughput (tasks/s) and p95 latency of a selector on the held-out live workloads."""
    thr, p95, lost = [], [], 0
    for s in cfg.eval_seeds:
        work = build_work(LiveWorkload(tasks=cfg.eval_tasks, rate_per_s=cfg.rate_per_s, seed=s))
        opts = LiveOptions(seed=s, progress=cfg.progress)
        res = run_live(make(), TwoStageScheduler(selector, make_placer(cfg.placer)), work, opts)
        thr.append(res.metrics.throughput)
        p95.append(res.metrics.latency_p95_s)
        lost += res.metrics.tasks_lost
    return {
        "throughput_per_s": float(np.mean(thr)),
        "throughput_std": sample_std(thr),
        "latency_p95_s": float(np.mean(p95)),
        "tasks_lost": lost,
    }


def _sim_profiler(spec: LiveClusterSpec) -> SimulatedProfiler:
    """The simulator's instrument for the live cluster's GPU models and the video kinds."""
    sc = Scenario(
        "live-twin", spec.to_cluster_spec(), WorkloadSpec(tasks=30, apps={a: 1.0 for a in VIDEO_APPS})
    )
    return SimulatedProfiler(Simulator(sc, generate_tasks(sc, 0), make_placer("mlsm")).testbed())


def transfer_interference(
    spec: LiveClusterSpec, cfg: LiveFinetuneConfig, out: Path
) -> tuple[dict[str, Any], LiveProfiler]:
    """Pretrain NCF in simulation, score it on live rows, update it online, score again."""
    sim_data = _sim_profiler(spec).colocation(0.5, cfg.seed)
    model = fit_interference(sim_data, "ncf", cfg.seed)
    prof = LiveProfiler(spec, cfg.device_backend)
    live = prof.colocation(cfg.profile_fraction, cfg.seed, cfg.progress)
    rng = np.random.default_rng(cfg.seed)
    idx = rng.permutation(len(live))
    tune, held = live.take(idx[: len(idx) // 2]), live.take(idx[len(idx) // 2 :])
    before = evaluate(model, held)
    model.update(tune)
    after = evaluate(model, held)
    live_only = evaluate(fit_interference(tune, "ncf", cfg.seed), held)
    model.save(out / "interference")
    _write_rows(out / "colocation.csv", live)
    return {
        "sim_rows": len(sim_data),
        "live_rows": len(live),
        "held_out_rows": len(held),
        "sim_pretrained": before,
        "sim_pretrained_then_live_update": after,
        "live_only_fit": live_only,
    }, prof


class _StepBar(BaseCallback):
    """tqdm bar over DQN steps (each a real task decision on the live cluster)."""

    def __init__(self, total: int) -> None:
        super().__init__()
        self.bar = tqdm(total=total, desc="live DQN", unit="step", disable=None)

    def _on_step(self) -> bool:
        self.bar.update(1)
        return True

    def _on_training_end(self) -> None:
        self.bar.close()


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _write_rows(path: Path, data: ColocationData) -> None:
    from rlsched.interference.measurements import write_colocation_csv

    write_colocation_csv(path, data)


def finetune_live(
    source: str | Path,
    out: str | Path,
    cfg: LiveFinetuneConfig | None = None,
    cluster: LiveClusterSpec | None = None,
) -> dict:
    """Both transfers of the module docstring; returns (and writes) the report.

    :param source: checkpoint directory of the simulator-trained network.
    :param out: output directory.
    :param cfg: the run's settings (``None``: the defaults).
    :param cluster: the live cluster (default: the embedded one).
    """
    cfg = cfg or LiveFinetuneConfig()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.set_num_threads(1)
    net, meta = scorer_from_checkpoint(source)
    spec = cluster or default_live_cluster()
    make = cluster_factory(spec, cfg)  # Ray joined or refused before the profiling's minutes
    _say(f"finetune --live: profiling co-runs on {len(spec.nodes)} live nodes for the interference model...")
    interference, _ = transfer_interference(spec, cfg, out)
    _say(f"finetune --live: zero-shot evaluation of {source} ({cfg.eval_tasks} live tasks a run)...")
    zero_shot = evaluate_live(GreedySelector(net), spec, cfg, make)
    _say("finetune --live: now mct on the same workloads...")
    mct = evaluate_live(MctSelector(), spec, cfg, make)
    workload = LiveWorkload(tasks=cfg.tasks_per_episode, rate_per_s=cfg.rate_per_s, seed=cfg.seed)
    version = network_feature_version(net)  # fed what it was trained on; meta keeps saying so
    env = LiveSchedulingEnv(spec, make, workload, placer=cfg.placer, feature_version=version)
    # Live steps are real tasks: a small buffer and an early start, the rest as in simulation.
    tc = TrainConfig(
        net_arch=tuple(meta["net_arch"]),
        seed=cfg.seed,
        buffer_size=10_000,
        batch_size=32,
        learning_starts=min(50, max(cfg.steps // 4, 1)),
        target_update_interval=100,
    )
    model = build_dqn(env, tc)
    scorer: NodeScorer = model.q_net.scorer  # type: ignore[assignment]
    scorer.feature_version = version
    scorer.load_state_dict(net.state_dict())
    model.q_net_target.scorer.load_state_dict(net.state_dict())  # type: ignore[union-attr]
    _say(f"finetune --live: fine-tuning for {cfg.steps:,} live steps (each a real task decision)")
    try:
        if cfg.steps > 0:
            model.learn(total_timesteps=cfg.steps, callback=_StepBar(cfg.steps) if cfg.progress else None)
    except KeyboardInterrupt:
        # Live steps are real task runs: keep what they taught (it lost them all).
        done = int(model.num_timesteps)
        kept = {"evaluation": None, "finetuned_live": dataclasses.asdict(cfg), "live_steps": done}
        save_checkpoint(out / "last", scorer.state_dict(), {**meta, **kept, "source": str(source)})
        raise KeyboardInterrupt(
            f"interrupted after {done:,} live DQN steps; weights saved in {out / 'last'}; "
            f"rlsched finetune --from {out / 'last'} --live --out ANOTHER goes on from them"
        ) from None
    env.close()
    scorer.eval()
    tuned = evaluate_live(GreedySelector(scorer), spec, cfg, make)
    # The source's simulated evaluation is not this network's: its own figures are live ones.
    live = {
        "evaluation": None,
        "live_evaluation": tuned,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "finetuned_live": dataclasses.asdict(cfg),
        "live_steps": cfg.steps,
        "source": str(source),
    }
    save_checkpoint(out / "last", scorer.state_dict(), {**meta, **live})
    report = {
        "source": str(source),
        "live_cluster": [n.name for n in spec.nodes],
        "config": dataclasses.asdict(cfg),
        "interference": interference,
        "zero_shot": zero_shot,
        "mct": mct,
        "fine_tuned": tuned,
    }
    (out / "transfer.json").write_text(json.dumps(report, indent=1))
    return report
