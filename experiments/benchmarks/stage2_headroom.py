"""Stage-2 headroom: IAWP's hold rules against a clairvoyant placer (a script, not a test).

Runs ``SELECTOR`` with each stage-2 variant on the same scenarios and seeds, in one run, and
prints throughput and p95 latency (mean ± sample std over seeds) and the throughput ratio to the
first variant. Variants:

* ``speedup`` — the paper's CPU/GPU rule with MLSM's GPU choice (no co-location awareness);
* ``coloc-greedy`` — the GPU with the largest predicted progress gain, never holds;
* ``iawp-line@G`` / ``iawp-pass@G`` — IAWP holding a subtask back while joining would add less
  than ``G`` predicted progress; ``line``: younger subtasks wait behind it, ``pass``: they may
  take the stream it refused;
* ``iawp-rl`` / ``iawp-rl@DIR`` — the learned placer, shipped or from a ``train --stage 2``
  checkpoint;
* ``clairvoyant@G`` — reads the simulator's *true* co-location factors (no real placer can):
  the GPU with the largest true progress gain, held back below ``G``, as ``iawp-pass`` would with
  a perfect model. It shows how much a better interference model or a learned placer could add.
* ``clairvoyant-pairs@G`` — the same rule, fed the simulator's true *pairwise* factors (as a
  noise-free profiler measures them, each pair alone at full share) composed as ``iawp`` composes
  them (slowdowns add): what the pairwise model loses by its form, with no prediction error.
* ``clairvoyant-ncf@G`` — the same rule, fed ``iawp``'s calibrated, online-learning NCF model
  (an observable placer): the loss against ``clairvoyant-pairs`` is the model's error.

Observable variants (``iawp-*``, ``clairvoyant-ncf``) take options after the gain:
``+active`` calibrates from an active survey of the same budget, ``+doubt=Z`` holds back only
when the gain stays below the threshold with the predicted slowdowns lowered by ``Z`` times the
model's spread (``iawp-pass@0.4+active+doubt=1``); ``+fallback=E`` places by ``speedup``'s rule
on nodes whose GPU model's observed prediction error is over ``E`` (:class:`IawpPlacer`). Each
run of an observable variant draws its own survey, seeded by the run's seed.

Use validation seeds to choose a constant, test seeds to report:

    python -m experiments.benchmarks.stage2_headroom --scenarios "interference-saturated#3000" \
        --first-seed 10001 --seeds 3 --variants "speedup,iawp-line@0.3,iawp-pass@0.4,clairvoyant@0.3"
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any, ClassVar

import numpy as np

from envs.simulator import Simulator
from experiments.evaluation import load_entry
from experiments.report_stats import mean_pm
from experiments.worker_pool import worker_init
from rlsched.interference.calibration import SurveyRequest
from rlsched.policies.iawp import IawpPlacer
from rlsched.policies.iawp_model import slowdown
from rlsched.policies.placers import SpeedupPlacer, core_free, fitting_gpus
from rlsched.policies.registry import make_placer, make_selector
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.scheduler import CPU, SubtaskPlacer, TwoStageScheduler
from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView


class ClairvoyantPlacer(SpeedupPlacer):
    """Reference only: co-location by the simulator's true interference factors.

    Declared clairvoyant (:class:`rlsched.scheduler.Clairvoyant`): the simulator hands itself to
    it when the run starts, and the run's metrics are marked clairvoyant.

    :param min_gain: hold a GPU subtask back (younger ones may pass) while the true gain of the
        best GPU's total progress rate is below this.
    """

    name = "clairvoyant"
    clairvoyant: ClassVar[bool] = True

    def __init__(self, min_gain: float) -> None:
        self.min_gain = min_gain
        self.sim: Simulator | None = None

    def bind_simulator(self, sim: Simulator) -> None:
        """The simulator whose true interference factors it reads."""
        self.sim = sim

    def _gain(self, sub: Subtask, node: int, g: int) -> float:
        sim = self.sim
        assert sim is not None
        runs = sim._gpu_runs[node][g]
        model = sim.nodes[node].gpus[g]
        kinds, shares = [r.sub.kind for r in runs], [r.sub.share for r in runs]
        before = sum(sim.truth.factors(kinds, shares, model)) if kinds else 0.0
        return sum(sim.truth.factors([*kinds, sub.kind], [*shares, sub.share], model)) - before

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        if sub.kind.device is Device.CPU:
            return CPU if core_free(node, view) else None
        unit = super().place(task, sub, node, view)  # the CPU/GPU choice of speedup
        if unit is None or unit == CPU:
            return unit
        gpus = fitting_gpus(task, sub, node, view)
        best = max(gpus, key=lambda g: (self._gain(sub, node, g), -g))
        if view.fast.node_gpu_running[node] > 0 and self._gain(sub, node, best) < self.min_gain:
            return None
        return best


class PredictedGainPlacer(IawpPlacer):
    """The clairvoyant placer's rule (``speedup``'s CPU/GPU choice, the GPU of largest gain, held
    back below ``min_gain`` while younger subtasks pass) on ``iawp``'s pairwise gains, from its
    calibrated, online-learning NCF model.

    :param min_gain: the hold threshold.
    :param options: more :class:`IawpPlacer` arguments (``active``, ``doubt``, ``online``).
    """

    name = "clairvoyant-ncf"

    def __init__(self, min_gain: float, **options: Any) -> None:
        super().__init__(min_gain=min_gain, hold="pass", **options)
        self._speedup = SpeedupPlacer()

    def reset(self, view: ClusterView, seed: int) -> None:
        super().reset(view, seed)
        self._speedup.reset(view, seed)

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        if sub.kind.device is Device.CPU:
            return CPU if core_free(node, view) else None
        unit = self._speedup.place(task, sub, node, view)
        if unit is None or unit == CPU:
            return unit
        gpus = fitting_gpus(task, sub, node, view)
        kind = sub.kind.name
        best = max(gpus, key=lambda g: (self._gain(kind, node, g, view), -g))
        if view.fast.node_gpu_running[node] > 0 and self._hold_gain(kind, node, best, view) < self.min_gain:
            return None
        return best


class TruePairsPlacer(PredictedGainPlacer):
    """Reference only: :class:`PredictedGainPlacer`'s rule on the simulator's true *pairwise*
    factors (each pair alone at full share, as a noise-free profiler measures them), composed as
    ``iawp`` composes them. Declared clairvoyant: the simulator hands itself to it.

    :param min_gain: the hold threshold.
    """

    name = "clairvoyant-pairs"
    clairvoyant: ClassVar[bool] = True

    def __init__(self, min_gain: float) -> None:
        super().__init__(min_gain, online=False)

    def survey_request(self) -> SurveyRequest:
        return SurveyRequest()  # nothing to measure: it reads the truth

    def bind_simulator(self, sim: Simulator) -> None:
        """Fill the pairwise table with the true factors of every kind pair on every GPU model."""
        from envs.simulated_instrument import _co_runner

        co_run = _co_runner(sim.truth)
        models = {g.name: g for n in sim.nodes for g in n.gpus if g is not None}
        kinds = {s.kind.name: s.kind for t in sim.tasks for s in t.graph.subtasks}
        for d, model in models.items():
            for k in kinds.values():
                for p in kinds.values():
                    self._slow.setdefault((d, k.name), {})[p.name] = slowdown(co_run(model, k, p))
        self._table_changed()


def _options(parts: list[str]) -> dict[str, Any]:
    """``active`` / ``doubt=Z`` option words of a variant, as placer arguments."""
    out: dict[str, Any] = {}
    for word in parts:
        key, _, value = word.partition("=")
        if key == "active":
            out["active"] = True
        elif key == "doubt":
            out["doubt"] = float(value)
        elif key == "fallback":
            out["fallback"] = float(value)
        else:
            raise ValueError(f"unknown variant option {word!r} (active, doubt=Z, fallback=E)")
    return out


def make_variant(spec: str) -> SubtaskPlacer:
    """A placer from ``NAME``, ``NAME@GAIN`` or ``iawp-rl@DIR`` (see the module docstring)."""
    name, _, rest = spec.partition("@")
    gain, *words = rest.split("+")
    opts = _options(words)
    if name == "clairvoyant":
        return ClairvoyantPlacer(float(gain or 0.3))
    if name == "clairvoyant-pairs":
        return TruePairsPlacer(float(gain or 0.3))
    if name == "clairvoyant-ncf":
        return PredictedGainPlacer(float(gain or 0.3), **opts)
    if name == "iawp-rl" and gain:
        from rlsched.policies.iawp_rl import LearnedIawpPlacer

        return LearnedIawpPlacer(model_dir=gain)
    if name in ("iawp-line", "iawp-pass") and gain:
        return IawpPlacer(min_gain=float(gain), hold=name.removeprefix("iawp-"), **opts)
    return make_placer("iawp" if name == "iawp-line" else name)  # bare: the registered placer


def run_one(scenario: str, selector: str, variant: str, seed: int) -> tuple[float, float]:
    """(tasks/min, p95 s) of one run of ``NAME[@RATE][#TASKS]``."""
    base = scenario_for_seed(load_entry(scenario, None), seed)
    tasks = generate_tasks(base, seed)
    placer = make_variant(variant)
    if isinstance(placer, IawpPlacer):
        # Each run draws its own survey (seeded by the run), so that a comparison averages over
        # survey draws rather than resting on the one that every run would otherwise share.
        placer.survey_seed = seed
    sim = Simulator(base, tasks, placer, seed=seed)  # binds the clairvoyant placer itself
    m = sim.run(TwoStageScheduler(make_selector(selector), placer))
    return m.throughput * 60.0, m.latency_p95_s


def _summary(
    scenarios: list[str],
    variants: list[str],
    seeds: list[int],
    res: dict[tuple[str, str, int], tuple[float, float]],
) -> None:
    """Each variant's throughput over the first's, across scenarios: geometric mean, min, and
    the share of scenarios at >= 0.99x."""
    print(f"\nover {len(scenarios)} scenarios (throughput over {variants[0]}, mean over seeds)")
    print("| placer | geometric mean | min | >= 0.99x | worst |\n|---|---|---|---|---|")
    for v in variants:
        r = np.array(
            [
                np.mean([res[(s, v, d)][0] for d in seeds])
                / np.mean([res[(s, variants[0], d)][0] for d in seeds])
                for s in scenarios
            ]
        )
        worst = scenarios[int(r.argmin())]
        print(
            f"| {v} | {np.exp(np.log(r).mean()):.3f} | {r.min():.3f} | {(r >= 0.99).mean():.0%} | {worst} |"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default="interference-saturated#3000,hetero-saturated#3000")
    p.add_argument("--variants", default="speedup,coloc-greedy,iawp-line@0.3,iawp-pass@0.3,clairvoyant@0.3")
    p.add_argument("--selector", default="mct")
    p.add_argument("--first-seed", type=int, default=10001)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--jobs", type=int, default=2)
    args = p.parse_args(argv)
    from experiments.case_folders import expand_folders

    scenarios = expand_folders(args.scenarios.split(","), "--scenarios")
    variants = args.variants.split(",")
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    shown = shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"$ python -m experiments.benchmarks.stage2_headroom {shown}")
    grid = [(s, v, d) for s in scenarios for v in variants for d in seeds]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.jobs, initializer=worker_init) as pool:
        futures = [pool.submit(run_one, s, args.selector, v, d) for s, v, d in grid]
        res = {key: f.result() for key, f in zip(grid, futures, strict=True)}
    for s in scenarios:
        print(f"\n{s}, selector {args.selector}, seeds {seeds[0]}-{seeds[-1]}")
        print("| placer | tasks/min | p95 s | × first |\n|---|---|---|---|")
        ref = None
        for v in variants:
            thr = np.array([res[(s, v, d)][0] for d in seeds])
            p95 = np.array([res[(s, v, d)][1] for d in seeds])
            ref = thr.mean() if ref is None else ref
            print(f"| {v} | {mean_pm(thr, ',.1f')} | {mean_pm(p95, '.2f')} | {thr.mean() / ref:.3f} |")
    if len(scenarios) > 1:
        _summary(scenarios, variants, seeds, res)
    print(f"\n{len(grid)} runs in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
