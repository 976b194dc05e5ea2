"""The live variant of the stage-1 Gymnasium environment (:mod:`rlsched.scheduling_env`).

Same spaces and reward as the simulated variant (``envs.gym_env.ClusterSchedulingEnv``), so a
network trained in simulation continues training here unchanged. An episode is one live
workload: ``reset`` starts a fresh cluster's agents, each ``step`` sends the task to the chosen
node and waits, in wall-clock time, for the next arrival.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.envs.registration import EnvSpec

from rlsched.features import FEATURE_VERSION
from rlsched.interference.instrument import ProfilingInstrument
from rlsched.policies.registry import make_placer, make_selector, placer_names
from rlsched.scheduler import TwoStageScheduler
from rlsched.scheduling_env import INVALID_PENALTY, SchedulingEnv
from rlsched.world import World
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.config import LiveClusterSpec
from runtime.cluster.live import LiveOptions, LiveResult, LiveSession
from runtime.cluster.workload import LiveWorkload, build_work

__all__ = ["INVALID_PENALTY", "LiveSchedulingEnv", "LiveWorlds"]


class LiveWorlds:
    """Opens a live session per episode on a fresh cluster.

    :param spec: the live cluster.
    :param make_cluster: builds a fresh cluster backend for an episode (LocalCluster, RayCluster).
    :param workload: tasks per episode, streams and rate (its seed is drawn per episode).
    :param placer: stage-2 policy on every node (a registry name).
    :param instrument: builds the profiling instrument of an episode's cluster, for a placer that
        calibrates (IAWP), or ``None``.
    """

    def __init__(
        self,
        spec: LiveClusterSpec,
        make_cluster: Callable[[], ClusterBackend],
        workload: LiveWorkload,
        placer: str,
        instrument: Callable[[ClusterBackend], ProfilingInstrument] | None = None,
    ) -> None:
        if placer not in placer_names():
            raise ValueError(f"unknown placer {placer!r}; known: {', '.join(placer_names())}")
        self.spec, self.make_cluster, self.workload = spec, make_cluster, workload
        self.placer_name, self.instrument = placer, instrument
        self.session: LiveSession | None = None

    @property
    def n_nodes(self) -> int:
        return len(self.spec.nodes)

    def open(self, seed: int | None, rng: np.random.Generator, options: dict[str, Any] | None) -> World:
        if options:  # none is read here: a given one would be ignored in silence
            raise ValueError(
                f"reset options: the live env takes none, got {', '.join(map(repr, sorted(options)))}"
            )
        run_seed = int(rng.integers(2**31 - 1)) if seed is None else int(seed)
        work = build_work(dataclasses.replace(self.workload, seed=run_seed))
        # The session's own selector only re-places tasks of a node that died after the last
        # arrival, when no agent is asked any more.
        sched = TwoStageScheduler(make_selector("mct"), make_placer(self.placer_name))
        cluster = self.make_cluster()
        instrument = self.instrument(cluster) if self.instrument is not None else None
        self.session = LiveSession(cluster, sched, work, LiveOptions(seed=run_seed), instrument)
        return self.session

    def abandon(self, world: World) -> None:
        """An abandoned episode still lets its tasks finish and stops its agents."""
        world.finish()


class LiveSchedulingEnv(SchedulingEnv):
    """Stage-1 scheduling of a live workload.

    :param spec: the live cluster.
    :param make_cluster: builds a fresh cluster backend for an episode (LocalCluster, RayCluster).
    :param workload: tasks per episode, streams and rate (its seed is drawn per episode).
    :param placer: stage-2 policy on every node (a registry name).
    :param instrument: builds the profiling instrument of an episode's cluster (IAWP calibration).
    :param feature_version: the observations' feature version (the network's being fine-tuned).
    """

    def __init__(
        self,
        spec: LiveClusterSpec,
        make_cluster: Callable[[], ClusterBackend],
        workload: LiveWorkload,
        placer: str = "mlsm",
        instrument: Callable[[ClusterBackend], ProfilingInstrument] | None = None,
        feature_version: int = FEATURE_VERSION,
    ) -> None:
        self.worlds = LiveWorlds(spec, make_cluster, workload, placer, instrument)
        super().__init__(self.worlds, feature_version=feature_version)
        self.cluster_spec = spec
        # Real executions: the same seed and actions give other timings, so other rewards.
        self.spec = EnvSpec(
            "rlsched/LiveScheduling-v0",
            entry_point=lambda **_: LiveSchedulingEnv(
                spec, make_cluster, workload, placer, instrument, feature_version
            ),
            nondeterministic=True,
            disable_env_checker=True,
        )

    @property
    def session(self) -> LiveSession | None:
        """The current (or last) episode's session."""
        return self.worlds.session

    @property
    def result(self) -> LiveResult | None:
        """The last episode's full result, once it has finished."""
        return None if self.worlds.session is None else self.worlds.session.result
