"""Online updates: learning from new samples, each id-table cell at the pace of its own count."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from models.interference.biased_mf import BiasedMF
from models.interference.ensemble import Ensemble, Model
from models.interference.mean_model import MeanModel
from models.interference.neumf import NeuMF
from models.interference.rows import Rows
from models.interference.training import NetTrainConfig, train


def _leaves(model: Model, prefix: str = "") -> list[tuple[str, NeuMF | BiasedMF]]:
    """(state_dict prefix, model) of the models with id tables inside ``model``."""
    if isinstance(model, Ensemble):
        return [leaf for i, m in enumerate(model.parts) for leaf in _leaves(m, f"{prefix}members.{i}.")]
    return [] if isinstance(model, MeanModel) else [(prefix, model)]


def usage(model: Model, rows: Rows) -> dict[str, torch.Tensor]:
    """How many of ``rows`` read each cell of each id table, by parameter name (as in the
    model's ``state_dict``); cells are indexed over the table's vocabulary axes.

    :param model: any interference model (a :class:`MeanModel` has none).
    :param rows: the samples.
    """
    out = {}
    for prefix, m in _leaves(model):
        for name, cells in m.table_index(rows.kind, rows.partner, rows.device).items():
            table = getattr(m, name)
            count = torch.zeros(table.shape[: len(m.axes[name])], dtype=torch.float64)
            for ix in cells:
                known = torch.stack([i >= 0 for i in ix]).all(0)
                count.index_put_(
                    tuple(i[known] for i in ix),
                    torch.ones(int(known.sum()), dtype=count.dtype),
                    accumulate=True,
                )
            out[prefix + name] = count
    return out


def resize_counts(model: Model, counts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``counts`` (see :func:`usage`) padded with zeros to the model's grown tables.

    :param model: the model after :meth:`grow`.
    :param counts: counts for its tables before growing.
    """
    out = {}
    params = dict(model.named_parameters())
    for name, c in counts.items():
        grown = torch.zeros(params[name].shape[: c.dim()], dtype=c.dtype)
        grown[tuple(slice(0, n) for n in c.shape)] = c
        out[name] = grown
    return out


@contextmanager
def count_scaled(model: Model, counts: dict[str, torch.Tensor]) -> Iterator[None]:
    """Inside the block, the gradient of each id-table cell is divided by ``1 + n``, where ``n``
    counts the samples it has learnt from (see :func:`usage`).

    That is the running-mean step of stochastic approximation: a device bias fitted on 700
    rows barely moves for a batch of new rows, while a kind seen for the first time learns at
    the full rate. Without it, a batch of samples of one new kind on a device drags the
    device's own parameters — and every prediction on that device — towards that kind.

    :param model: the model to train.
    :param counts: per table parameter, samples per cell.
    """
    handles = []
    for name, p in model.named_parameters():
        c = counts.get(name)
        if c is None:
            continue
        scale = (1.0 / (1.0 + c)).to(p.dtype).reshape(*c.shape, *([1] * (p.dim() - c.dim())))
        handles.append(p.register_hook(lambda g, s=scale: g * s))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def online_update(
    model: Model,
    rows: Rows,
    base: NetTrainConfig,
    counts: dict[str, torch.Tensor],
    steps: int,
    lr: float,
    tables_only: bool = True,
    n_total: int | None = None,
    seed: int = 0,
) -> None:
    """Keep learning from new samples: plain SGD (no momentum) with the fit's loss and L2, each
    id-table cell's step scaled by ``1 / (1 + samples it has seen)`` (:func:`count_scaled`).

    No weight decay: it would shrink every weight a little at each update and wash the
    pretrained model out over a long run.

    :param model: a trained model (grown to cover the rows' vocabulary).
    :param rows: the new samples.
    :param base: the configuration the model was fitted with (loss, L2).
    :param counts: samples per table cell so far (see :func:`usage`).
    :param steps: SGD steps, each on a mini-batch of up to 64 rows.
    :param lr: SGD learning rate.
    :param tables_only: update only the per-entity parameters.
    :param n_total: rows learnt from in all, including these (for the prior L2).
    :param seed: shuffling seed.
    """
    bs = min(len(rows), 64)
    cfg = NetTrainConfig(
        epochs=max(1, round(steps * bs / max(len(rows), 1))),
        lr=lr,
        weight_decay=0.0,
        l2=base.l2,
        prior=base.prior,
        batch_size=bs,
        optimizer="sgd",
        loss=base.loss,
        feasible_weight=base.feasible_weight,
        momentum=0.0,
        tables_only=tables_only,
    )
    with count_scaled(model, counts):
        train(model, rows, cfg, seed=seed, n_total=n_total)
