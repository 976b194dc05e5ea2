"""Fitting an interference model: the loss, the optimiser and the training loop."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from models.interference.ensemble import Ensemble, Model
from models.interference.mean_model import MeanModel
from models.interference.neumf import NeuMF
from models.interference.rows import Rows


@dataclass
class NetTrainConfig:
    """How a model is trained.

    :param epochs: passes over the data.
    :param lr: learning rate.
    :param weight_decay: decoupled weight decay of every parameter (AdamW; SGD: plain L2).
    :param l2: L2 on the id embeddings, factors and biases.
    :param prior: how ``l2`` applies: ``False`` — Koren-style, on what each sample uses, per
        sample (an entity's penalty grows with its samples); ``True`` — once on every table,
        divided by the training-set size, a Gaussian prior: an entity seen in two rows is pulled
        towards the shared part far harder than one seen in fifty.
    :param batch_size: rows per step; 0 = the whole set (full batch).
    :param optimizer: ``"adam"`` or ``"sgd"``.
    :param loss: throughput loss, ``"l1"``, ``"huber"`` or ``"mse"``.
    :param feasible_weight: weight of the feasibility (binary cross-entropy) loss.
    :param momentum: SGD momentum (0 = plain SGD, as for online updates).
    :param tables_only: train only the id embeddings, factors and biases (see
        :func:`table_parameters`), keeping the shared network fixed.
    :param cosine: decay the learning rate to 0 over ``epochs`` on a cosine; full-batch Adam on
        a few hundred rows otherwise keeps oscillating instead of settling.
    """

    epochs: int = 300
    lr: float = 0.01
    weight_decay: float = 1e-4
    l2: float = 0.0
    prior: bool = False
    batch_size: int = 0
    optimizer: str = "adam"
    loss: str = "huber"
    feasible_weight: float = 0.5
    momentum: float = 0.9
    cosine: bool = False
    tables_only: bool = False


def _loss(model: Model, rows: Rows, cfg: NetTrainConfig, n_total: int) -> torch.Tensor:
    if isinstance(model, Ensemble):
        # The sum of the members' own losses: each learns on its own, as when fitted alone.
        return sum((_loss(m, rows, cfg, n_total) for m in model.parts), torch.zeros(()))
    logit, value = model(*rows.inputs())
    feasible = rows.y > 0
    loss = cfg.feasible_weight * F.binary_cross_entropy_with_logits(logit, feasible.float())
    has_value = feasible if rows.value_known is None else feasible & rows.value_known
    if bool(has_value.any()):
        v, y = value[has_value], rows.y[has_value]
        fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = {
            "l1": F.l1_loss,
            "mse": F.mse_loss,
            "huber": lambda a, b: F.huber_loss(a, b, delta=0.1),
        }[cfg.loss]
        loss = loss + fn(v, y)
    if cfg.l2 and not isinstance(model, MeanModel):
        reg = model.regulariser(None) / n_total if cfg.prior else model.regulariser(rows)
        loss = loss + cfg.l2 * reg
    return loss


def table_parameters(model: Model) -> list[nn.Parameter]:
    """The per-entity parameters of a model: id embeddings, factors and biases (not the shared
    network, side-feature maps or global offsets).

    :param model: any interference model.
    """
    if isinstance(model, Ensemble):
        return [p for m in model.parts for p in table_parameters(m)]
    if isinstance(model, NeuMF):
        return [getattr(model, n) for n in model.axes]
    return [p for n, p in model.named_parameters() if n != "mu"]


def _optimizer(model: Model, cfg: NetTrainConfig) -> torch.optim.Optimizer:
    params = table_parameters(model) if cfg.tables_only else list(model.parameters())
    if cfg.optimizer == "adam":
        return torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=True)
    if cfg.optimizer == "sgd":
        return torch.optim.SGD(
            params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay, foreach=True
        )
    raise ValueError(f"optimizer must be 'adam' or 'sgd', got {cfg.optimizer!r}")


def train(
    model: Model,
    rows: Rows,
    cfg: NetTrainConfig,
    seed: int = 0,
    on_epoch: Callable[[int], None] | None = None,
    n_total: int | None = None,
) -> None:
    """Train ``model`` on ``rows`` (a :class:`MeanModel` just counts them).

    :param model: the model, trained in place.
    :param rows: the training set.
    :param cfg: optimiser, epochs, loss.
    :param seed: shuffling and dropout seed.
    :param on_epoch: called with the epoch number (1-based) after each epoch, e.g. to validate.
    :param n_total: rows the model has learnt from in all, for the ``prior`` L2 (default: these
        rows); online updates pass what it saw before plus the new rows.
    """
    if isinstance(model, MeanModel):
        if rows.value_known is not None:
            rows = rows.take(torch.nonzero(rows.value_known).squeeze(1))
        model.add(rows.kind, rows.partner, rows.device, rows.y)
        return
    if not list(model.parameters()) or len(rows) == 0:
        return
    opt = _optimizer(model, cfg)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, cfg.epochs) if cfg.cosine else None
    g = torch.Generator().manual_seed(seed)
    n = len(rows)
    bs = cfg.batch_size if 0 < cfg.batch_size < n else n
    model.train()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout draws from the global generator
        for epoch in range(1, cfg.epochs + 1):
            order = torch.randperm(n, generator=g) if bs < n else torch.arange(n)
            for start in range(0, n, bs):
                opt.zero_grad()
                _loss(model, rows.take(order[start : start + bs]), cfg, n_total or n).backward()
                opt.step()
            if sched is not None:
                sched.step()
            if on_epoch is not None:
                on_epoch(epoch)
    model.eval()
