"""Hyper-parameters of the interference model's fit (`rlsched.interference.predictor.fit_interference`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from models.interference.training import NetTrainConfig


@dataclass
class FitOptions:
    """Hyper-parameters of :func:`fit_interference`.

    Defaults were chosen on validation splits carved from the *observed* rows of the Gavel
    benchmark (``experiments/benchmarks/bench_interference.py --dev``), the same way for ``ncf``
    and ``svd``. Each method fits an ensemble over regularisation strengths
    (:class:`models.interference.ensemble.Ensemble`): on a few hundred rows no single strength suits both
    dense data and a device seen a few dozen times, and averaging them beats choosing one on a
    validation split that small.

    :param ncf: NeuMF constructor arguments (besides vocabulary and feature sizes).
    :param ncf_train: NeuMF training (full-batch Adam, cosine decay over a fixed epoch count).
    :param ncf_members: one NeuMF per entry, trained with ``ncf_train`` updated by the entry.
    :param svd: BiasedMF constructor arguments (layout, rank).
    :param svd_train: BiasedMF training (mini-batch SGD with momentum, Gaussian-prior L2).
    :param svd_members: one BiasedMF per entry, trained with ``svd_train`` updated by the entry.
    :param mirror_feasibility: ``ncf`` and ``svd`` also learn feasibility from each observed row
        read the other way round (:meth:`models.interference.rows.Rows.mirrored`).
    """

    ncf: dict[str, Any] = field(
        default_factory=lambda: {
            "dim": 8,
            "mlp_dim": 16,
            "hidden": [64, 32],
            "dropout": 0.0,
            "wide": True,
            "symmetric": True,
        }
    )
    ncf_train: NetTrainConfig = field(
        default_factory=lambda: NetTrainConfig(
            epochs=300, lr=0.01, weight_decay=0.1, l2=1.0, prior=True, cosine=True, optimizer="adam"
        )
    )
    ncf_members: list[dict[str, Any]] = field(
        default_factory=lambda: [{"weight_decay": 0.1}, {"weight_decay": 1.0}, {"weight_decay": 3.0}]
    )
    svd: dict[str, Any] = field(default_factory=lambda: {"layout": "dk-p", "rank": 4})
    # Full-batch (batch_size 0), 800 steps per member instead of 6,000 mini-batches: ~6x faster
    # (Gavel CSV ~27 s -> ~4 s) and no worse. Chosen on validation rows (bench_interference
    # --dev, seeds 0-2), dev MAE a/b: mini-batch (1,000 epochs, lr 0.2) 0.0771/0.0899; full
    # batch 1,000 epochs lr 1.0 0.0758/0.0886, 1.5 0.0753/0.0885, 2.0 0.0733/0.0885, 3.0
    # diverges (0.129/0.112); 800 epochs lr 1.5 0.0759/0.0885, 2.0 0.0751/0.0883. lr 1.5 keeps
    # a 2x margin below divergence; 800 epochs keeps the fit under 5 s.
    svd_train: NetTrainConfig = field(
        default_factory=lambda: NetTrainConfig(
            epochs=800, lr=1.5, batch_size=0, optimizer="sgd", weight_decay=0.0, l2=0.1, prior=True
        )
    )
    svd_members: list[dict[str, Any]] = field(
        default_factory=lambda: [{"l2": 0.03}, {"l2": 0.1}, {"l2": 0.3}]
    )
    mirror_feasibility: bool = True
