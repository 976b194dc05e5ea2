"""Masked double DQN that fine-tunes the LDWP node scorer from a stream of live transitions.

``rlsched train`` and ``finetune --live`` run stable-baselines3's DQN over a Gymnasium env, which
owns the loop: it asks for an action, then waits for the step. A service cannot hand its dispatch
loop to a learner, so here the roles turn around (CleanRL-style, in one readable piece): the
dispatcher pushes each finished transition with :meth:`OnlineDqn.add`, and a background thread
calls :meth:`OnlineDqn.learn` when it has time. Nothing here blocks on the other side: ``add``
appends to a bounded ring under a short lock; ``learn`` copies a sampled batch out under it.

Targets are double DQN with semi-MDP discounting (:mod:`models.time_discount`): each
transition carries its own discount ``0.5 ** (dt / half_life_s)``; the next state's action is
picked by the online network among its feasible nodes and valued by the target network.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from models.qnet import NodeScorer

#: Keys of an observation (``rlsched.features.encode_observation``).
OBS_KEYS = ("nodes", "task", "cluster", "mask")


@dataclass(frozen=True)
class OnlineDqnConfig:
    """Settings of the online learner.

    :param buffer: transitions kept (the oldest are dropped).
    :param batch: transitions per gradient step.
    :param learning_starts: transitions before the first step.
    :param lr: Adam learning rate (the ``rlsched train`` default).
    :param target_every: gradient steps between target-network copies.
    :param max_grad_norm: gradient clipping (SB3's DQN default).
    :param seed: sampling and initialisation seed.
    """

    buffer: int = 20_000
    batch: int = 64
    learning_starts: int = 128
    lr: float = 1e-4
    target_every: int = 250
    max_grad_norm: float = 10.0
    seed: int = 0


class OnlineDqn:
    """A node scorer learning online, its target network and its replay ring.

    :param net: the network to fine-tune (its weights are copied; the caller's are untouched).
    :param cfg: settings.
    :param updates: gradient steps taken before (a resumed learner continues the count).
    """

    def __init__(self, net: NodeScorer, cfg: OnlineDqnConfig = OnlineDqnConfig(), updates: int = 0) -> None:
        self.cfg = cfg
        self.net = copy.deepcopy(net).train()
        self.target = copy.deepcopy(net).eval()
        self.opt = torch.optim.Adam(self.net.parameters(), lr=cfg.lr)
        self.updates = updates
        self.added = 0
        self._rng = np.random.default_rng(cfg.seed)
        self._lock = threading.Lock()  # the ring
        self._net_lock = threading.Lock()  # the weights: a step, a snapshot or a restart at a time
        self._ring: list[tuple[dict[str, np.ndarray], int, float, dict[str, np.ndarray], float]] = []
        self._pos = 0

    # ---- the dispatcher's side -------------------------------------------------------------
    def add(
        self,
        obs: dict[str, np.ndarray],
        action: int,
        reward: float,
        next_obs: dict[str, np.ndarray],
        discount: float,
    ) -> None:
        """One transition (observations as :func:`rlsched.features.encode_observation` gives them).
        A transition whose cluster size differs from the ring's empties the ring first (a node
        joined or left: old observations no longer stack)."""
        item = (obs, int(action), float(reward), next_obs, float(discount))
        with self._lock:
            if self._ring and self._ring[0][0]["nodes"].shape != obs["nodes"].shape:
                self._ring.clear()
                self._pos = 0
            if len(self._ring) < self.cfg.buffer:
                self._ring.append(item)
            else:
                self._ring[self._pos] = item
                self._pos = (self._pos + 1) % self.cfg.buffer
            self.added += 1

    def __len__(self) -> int:
        with self._lock:
            return len(self._ring)

    # ---- the learner's side ----------------------------------------------------------------
    def learn(self) -> float | None:
        """One gradient step on a sampled batch; its TD loss (``None``: too few transitions)."""
        batch = self._sample()
        if batch is None:
            return None
        with self._net_lock:
            return self._step(*batch)

    def _step(
        self,
        obs: dict[str, torch.Tensor],
        actions: torch.Tensor,
        rewards: torch.Tensor,
        nxt: dict[str, torch.Tensor],
        discounts: torch.Tensor,
    ) -> float:
        with torch.no_grad():
            q_next_online = self.net(nxt["nodes"], nxt["task"], nxt["cluster"], nxt["mask"])
            best = q_next_online.argmax(dim=1, keepdim=True)
            q_next = self.target(nxt["nodes"], nxt["task"], nxt["cluster"], nxt["mask"]).gather(1, best)
            target = rewards + discounts * q_next.squeeze(1)
        q = self.net(obs["nodes"], obs["task"], obs["cluster"], obs["mask"]).gather(1, actions).squeeze(1)
        loss = nn.functional.smooth_l1_loss(q, target)
        self.opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(self.net.parameters(), self.cfg.max_grad_norm)
        self.opt.step()
        self.updates += 1
        if self.updates % self.cfg.target_every == 0:
            self.target.load_state_dict(self.net.state_dict())
        return float(loss.detach())

    def _sample(
        self,
    ) -> (
        tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor, dict[str, torch.Tensor], torch.Tensor]
        | None
    ):
        with self._lock:
            n = len(self._ring)
            if n < max(self.cfg.learning_starts, 1):
                return None
            picks = [self._ring[i] for i in self._rng.integers(0, n, size=self.cfg.batch)]
        obs = {k: torch.from_numpy(np.stack([p[0][k] for p in picks]).astype(np.float32)) for k in OBS_KEYS}
        nxt = {k: torch.from_numpy(np.stack([p[3][k] for p in picks]).astype(np.float32)) for k in OBS_KEYS}
        actions = torch.tensor([[p[1]] for p in picks], dtype=torch.int64)
        rewards = torch.tensor([p[2] for p in picks], dtype=torch.float32)
        discounts = torch.tensor([p[4] for p in picks], dtype=torch.float32)
        return obs, actions, rewards, nxt, discounts

    def snapshot(self) -> NodeScorer:
        """A copy of the network as it is now, in eval mode (for a candidate or a checkpoint)."""
        with self._net_lock, torch.no_grad():
            return copy.deepcopy(self.net).eval()

    def restart_from(self, net: NodeScorer) -> None:
        """Continue from ``net``'s weights (a rolled-back candidate's learning is dropped);
        the update count goes on."""
        with self._net_lock:
            self._restart(net)

    def _restart(self, net: NodeScorer) -> None:
        self.net.load_state_dict(net.state_dict())
        self.target.load_state_dict(net.state_dict())
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.cfg.lr)
