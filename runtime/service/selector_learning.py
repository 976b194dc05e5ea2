"""The service's second learner: LDWP fine-tuned from the service's own stage-1 decisions.

On with ``selector_learning = true`` when the incumbent selector is ``ldwp``. Each decision the
incumbent makes becomes a transition once the next one is made (:meth:`SelectorLearning.record`,
on the dispatcher thread: one observation encoding and a ring append). The reward is the one
``rlsched train`` uses by default, minus the task-seconds in the system between two decisions
(in task-minutes), here counted as the tasks on the nodes (queued there or running) after the
decision times the seconds to the next; its discount follows elapsed time
(``0.5 ** (dt / HALF_LIFE_S)``).

A background thread takes DQN steps (:class:`models.online_dqn.OnlineDqn`), at most
:data:`STEPS_PER_TRANSITION` per transition so that it never takes the CPU a quiet service
does not need, and never holds the cluster lock. Every ``selector_candidate_updates`` steps, when
no canary runs, it puts its network up as a candidate: the canary
(:mod:`runtime.service.promotion`) promotes it only when measured not worse on its share of the
tasks, and rolls it back otherwise; after a rollback the learner starts again from the
incumbent's weights (what it learnt since is dropped). Tasks the candidate places are not
learnt from (another policy's decisions).

The learner's network, its step count and a promoted network are checkpointed with the rest of
the learned state (:mod:`runtime.service.learned_state`) and resumed after a restart, when they
were learnt from the same configured selector checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import logging
import threading
from typing import Any

import numpy as np
import torch

from models.online_dqn import OnlineDqn, OnlineDqnConfig
from models.qnet import NodeScorer
from rlsched.features import FEATURE_VERSION, encode_observation
from rlsched.policies import ldwp_from_network
from rlsched.tasks import Task
from rlsched.view import ClusterView
from runtime.service.learned_state import Learned, Network
from runtime.service.promotion import Promotion, PromotionError

log = logging.getLogger(__name__)

#: Seconds after which a reward counts half. Live video tasks take 0.05-2 s on the embedded
#: cluster; ``rlsched train``'s 30 s matches simulated tasks of 5-35 s.
HALF_LIFE_S = 2.0
#: Most gradient steps per recorded transition (a replay ratio; SB3's DQN default is 1 in 4).
STEPS_PER_TRANSITION = 1.0
#: Seconds the learner sleeps when it is ahead of the transitions or has too few.
IDLE_S = 0.05
#: Name of the learner's candidates under the canary.
CANDIDATE = "ldwp-online"


def weights_sha256(net: NodeScorer) -> str:
    """A digest of a network's weights (the version of a network that learns)."""
    buf = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in net.state_dict().items()}, buf)
    return hashlib.sha256(buf.getvalue()).hexdigest()


class SelectorLearning:
    """Fine-tunes the incumbent LDWP selector from live decisions, in the background.

    :param incumbent: the service's LDWP selector when it starts (its ``net`` and ``meta``).
    :param origin: sha256 of the configured selector checkpoint.
    :param promotion: where candidates go.
    :param candidate_updates: gradient steps between two candidates.
    :param learned: the learned state of the last process (resumed when its origin matches).
    """

    def __init__(
        self,
        incumbent: Any,
        origin: str,
        promotion: Promotion,
        candidate_updates: int,
        learned: Learned | None = None,
    ) -> None:
        self.origin, self.promotion, self.candidate_updates = origin, promotion, candidate_updates
        self.meta = dict(incumbent.meta)
        #: The incumbent's feature version: what its transitions are encoded in.
        self.feature_version = int(self.meta.get("feature_version", FEATURE_VERSION))
        self.promoted: NodeScorer | None = None
        start, updates = incumbent.net, 0
        if learned is not None and learned.selector is not None and learned.selector_origin == origin:
            start, updates = learned.selector[0], learned.selector_updates
            self.promoted = learned.promoted[0] if learned.promoted is not None else None
        self.dqn = OnlineDqn(start, OnlineDqnConfig(), updates)
        self.incumbent_net = self.promoted if self.promoted is not None else incumbent.net
        self.candidates = 0
        self.loss: float | None = None
        self._first = self._last_candidate = updates  # the replay ratio counts this process's steps
        self._candidate: tuple[str, NodeScorer] | None = None  # under the canary: version, network
        self._prev: tuple[dict[str, np.ndarray], int, float, float] | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rlsched-selector-learner", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    # ---- the dispatcher's side (cluster lock held) ---------------------------------------------
    def record(self, task: Task, view: ClusterView, mask: np.ndarray, node: int) -> None:
        """The incumbent sent ``task`` to ``node``: it completes the previous transition."""
        obs = encode_observation(view, task, mask, self.feature_version)
        now = float(view.time_s)
        prev = self._prev
        if prev is not None:
            p_obs, p_node, p_t, p_in = prev
            dt = max(now - p_t, 0.0)
            self.dqn.add(p_obs, p_node, -p_in * dt / 60.0, obs, 0.5 ** (dt / HALF_LIFE_S))
        self._prev = (obs, int(node), now, float(view.tasks_on_node.sum()) + 1.0)

    # ---- the learner thread -------------------------------------------------------------------
    def _run(self) -> None:
        torch.set_num_threads(1)
        while not self._stop.is_set():
            try:
                self._settle()
                if self.dqn.updates - self._first >= STEPS_PER_TRANSITION * self.dqn.added:
                    self._stop.wait(IDLE_S)
                    continue
                loss = self.dqn.learn()
                if loss is None:
                    self._stop.wait(IDLE_S)
                    continue
                self.loss = loss
                if self.dqn.updates - self._last_candidate >= self.candidate_updates:
                    self._propose()
            except Exception:  # learning must never take the service down
                log.exception("rlsched serve: the selector learner failed a step")
                self._stop.wait(1.0)

    def _propose(self) -> None:
        net = self.dqn.snapshot()
        version = weights_sha256(net)
        selector = ldwp_from_network(net, self.meta, f"online ({self.dqn.updates} steps)")
        try:
            self.promotion.start_selector(CANDIDATE, selector, version)
        except PromotionError:
            return  # a canary runs (an admin's): try again at the next interval
        self._candidate, self._last_candidate = (version, net), self.dqn.updates
        self.candidates += 1
        log.warning("rlsched serve: the selector learner put up a candidate after %d steps", self.dqn.updates)

    def _settle(self) -> None:
        """When the canary has judged the learner's candidate: keep it if promoted, else start
        again from the incumbent."""
        if self._candidate is None or self.promotion.canary is not None:
            return
        (version, net), self._candidate = self._candidate, None
        ended = [e for e in self.promotion.history if e["sha256"] == version and e["event"] != "canary"]
        if ended and ended[-1]["event"] == "promoted":
            self.promoted = self.incumbent_net = net
            return
        self.dqn.restart_from(self.incumbent_net)

    # ---- state --------------------------------------------------------------------------------
    def state(self) -> tuple[Network, int, Network | None]:
        """(the learner's network and metadata, its steps, a promoted network) to checkpoint."""
        meta = {**self.meta, "online_steps": self.dqn.updates}
        promoted = (self.promoted, meta) if self.promoted is not None else None
        return (self.dqn.snapshot(), meta), self.dqn.updates, promoted

    def describe(self) -> dict[str, Any]:
        """Steps, transitions and candidates (``/v1/models``)."""
        return {
            "updates": self.dqn.updates,
            "transitions": self.dqn.added,
            "candidates": self.candidates,
            "loss": None if self.loss is None else round(self.loss, 6),
            "promoted_online": self.promoted is not None,
        }
