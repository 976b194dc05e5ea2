"""Completing a sparse row × column matrix from a few observed entries (kind × metric profiles).

Three completers over the same long-format input — observed ``(row, col, value)`` triples on a
standardised scale — each returning the full dense prediction:

* :func:`fit_ncf` — NeuMF-style (GMF + MLP) with side information: a row's vector is a linear
  map of its side features plus its own embedding; a GMF term (row · column embedding) and an
  MLP over ``[row vector, column embedding]`` predict the entry, plus a per-column bias. With ~2
  observed entries per row, embeddings alone cannot generalise: the side map is shared by every
  row and column, so all observations train it, and the row embeddings are held small by an L2
  penalty. A few networks are trained at once as one batched ensemble (``bmm``), which costs
  little more than one network and averages away the variance of such a small fit.
* :func:`fit_svd` — biased matrix factorisation trained by SGD (``mu + b_r + b_c + p_r · q_c``),
  the collaborative-filtering reconstruction of Paragon/Quasar: the baseline to beat.
* :func:`fit_column_mean` — each column's observed mean.

Only torch and numpy here (ARCHITECTURE.md section 2): the meaning of rows and columns lives in
``rlsched.interference.kind_profiles``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class NcfConfig:
    """Hyper-parameters of the NCF completer. Defaults: chosen by
    ``experiments.benchmarks.bench_profiles --tune`` on held-out *measurements* of the built-in
    kinds (two per kind), never on the true profiles.

    :param emb_dim: size of the row and column embeddings.
    :param hidden: hidden layer widths.
    :param epochs: full-batch Adam steps.
    :param lr: Adam learning rate.
    :param weight_decay: L2 penalty on the weights (side map, metric embeddings, MLP), relative
        to the summed squared error of the observations.
    :param emb_l2: L2 penalty on a row's own embedding, per observation of the row; large values
        make the prediction rely on side features only.
    :param ensemble: networks trained together and averaged.
    """

    emb_dim: int = 1
    hidden: tuple[int, ...] = (16,)
    epochs: int = 400
    lr: float = 0.01
    weight_decay: float = 3.0
    emb_l2: float = 100.0
    ensemble: int = 8


@dataclass(frozen=True)
class SvdConfig:
    """Hyper-parameters of the biased matrix-factorisation (SVD-style) completer. Defaults: chosen
    like :class:`NcfConfig`'s. With two observations per row validation keeps asking for more
    shrinkage: the factors cannot be learnt, and the fit tends to the column mean.

    :param rank: latent factors per row and column.
    :param epochs: passes over the observed entries (one SGD step per entry, shuffled).
    :param lr: SGD step size.
    :param reg: L2 penalty on biases and factors (per step, as in Funk SVD).
    :param init_std: std of the initial factors.
    """

    rank: int = 1
    epochs: int = 300
    lr: float = 0.02
    reg: float = 20.0
    init_std: float = 0.1


def _check(rows: np.ndarray, cols: np.ndarray, y: np.ndarray, n_rows: int, n_cols: int) -> None:
    if not rows.shape == cols.shape == y.shape or rows.ndim != 1:
        raise ValueError(
            f"rows, cols and y must be 1-D of one length, got {rows.shape}, {cols.shape}, {y.shape}"
        )
    if rows.size == 0:
        raise ValueError("no observed entries to complete from")
    if rows.min() < 0 or rows.max() >= n_rows or cols.min() < 0 or cols.max() >= n_cols:
        raise ValueError("row or column index out of range")
    if not np.all(np.isfinite(y)):
        raise ValueError("observed values must be finite")


def fit_column_mean(
    rows: np.ndarray, cols: np.ndarray, y: np.ndarray, n_rows: int, n_cols: int
) -> np.ndarray:
    """Each column's observed mean, the overall mean for a column with no observations.

    :param rows: row index of each observed entry.
    :param cols: column index of each observed entry.
    :param y: observed values.
    :param n_rows: rows of the matrix.
    :param n_cols: columns of the matrix.
    :returns: ``(n_rows, n_cols)`` predictions.
    """
    _check(rows, cols, y, n_rows, n_cols)
    sums = np.bincount(cols, weights=y, minlength=n_cols)
    counts = np.bincount(cols, minlength=n_cols)
    means = np.where(counts > 0, sums / np.maximum(counts, 1), y.mean())
    return np.broadcast_to(means, (n_rows, n_cols)).copy()


def fit_svd(
    rows: np.ndarray,
    cols: np.ndarray,
    y: np.ndarray,
    n_rows: int,
    n_cols: int,
    config: SvdConfig = SvdConfig(),
    seed: int = 0,
) -> np.ndarray:
    """Biased matrix factorisation by per-entry SGD (Funk SVD, as Quasar reconstructs profiles).

    :param rows: row index of each observed entry.
    :param cols: column index of each observed entry.
    :param y: observed values (standardised per column is best).
    :param n_rows: rows of the matrix.
    :param n_cols: columns of the matrix.
    :param config: hyper-parameters.
    :param seed: initialisation and shuffling.
    :returns: ``(n_rows, n_cols)`` predictions.
    """
    _check(rows, cols, y, n_rows, n_cols)
    rng = np.random.default_rng(seed)
    mu = float(y.mean())
    br, bc = np.zeros(n_rows), np.zeros(n_cols)
    p = rng.normal(0.0, config.init_std, (n_rows, config.rank))
    q = rng.normal(0.0, config.init_std, (n_cols, config.rank))
    lr, reg = config.lr, config.reg
    # A plain loop: SGD is sequential by nature and there are only ~10^2 entries per epoch.
    for _ in range(config.epochs):
        for i in rng.permutation(y.size):
            r, c = rows[i], cols[i]
            err = y[i] - (mu + br[r] + bc[c] + p[r] @ q[c])
            br[r] += lr * (err - reg * br[r])
            bc[c] += lr * (err - reg * bc[c])
            pr = p[r].copy()
            p[r] += lr * (err * q[c] - reg * p[r])
            q[c] += lr * (err * pr - reg * q[c])
    return mu + br[:, None] + bc[None, :] + p @ q.T


class _BatchedLinear(nn.Module):
    """``E`` independent linear layers applied to ``E`` batches at once."""

    def __init__(self, ensemble: int, n_in: int, n_out: int) -> None:
        super().__init__()
        bound = 1.0 / np.sqrt(n_in)
        self.weight = nn.Parameter(torch.empty(ensemble, n_in, n_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(ensemble, 1, n_out).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class NcfMlp(nn.Module):
    """An ensemble of NeuMF-style networks over kinds with side features and metrics.

    A kind's vector is a linear map of its side features (shared by every metric, so all
    observations train it) plus its own embedding (kept small: with ~2 observations per kind
    it can only correct what the features miss). A GMF term ``<kind, metric>`` and an MLP over
    ``[kind, metric]`` both read it; a per-metric bias sets each metric's level.

    :param n_rows: rows (kinds).
    :param n_cols: columns (metrics).
    :param side_dim: side features per row (0 for none).
    :param config: sizes.
    """

    def __init__(self, n_rows: int, n_cols: int, side_dim: int, config: NcfConfig) -> None:
        super().__init__()
        e, d = config.ensemble, config.emb_dim
        self.row_emb = nn.Parameter(torch.zeros(e, n_rows, d))
        self.side_proj = nn.Parameter(torch.randn(e, side_dim, d) / max(side_dim, 1) ** 0.5)
        self.col_emb = nn.Parameter(torch.randn(e, n_cols, d) * 0.1)
        self.col_bias = nn.Parameter(torch.zeros(e, n_cols))
        layers: list[nn.Module] = []
        width = 2 * d
        for h in config.hidden:
            layers += [_BatchedLinear(e, width, h), nn.ReLU()]
            width = h
        layers.append(_BatchedLinear(e, width, 1))
        self.mlp = nn.Sequential(*layers)

    def kind_vectors(self, side: torch.Tensor) -> torch.Tensor:
        """``(ensemble, n_rows, emb_dim)`` kind vectors.

        :param side: side features of every row, ``(n_rows, side_dim)``.
        """
        return torch.matmul(side, self.side_proj) + self.row_emb

    def forward(self, rows: torch.Tensor, cols: torch.Tensor, side: torch.Tensor) -> torch.Tensor:
        """Predictions ``(ensemble, n)`` for entries ``(rows[i], cols[i])``.

        :param rows: row indices, ``(n,)``.
        :param cols: column indices, ``(n,)``.
        :param side: side features of every row, ``(n_rows, side_dim)``.
        """
        kind = self.kind_vectors(side)[:, rows]
        metric = self.col_emb[:, cols]
        gmf = (kind * metric).sum(-1)
        mlp = self.mlp(torch.cat([kind, metric], dim=-1)).squeeze(-1)
        return gmf + mlp + self.col_bias[:, cols]

    def penalty(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(L2 of the weights, L2 of the observed rows' embeddings), summed per network.

        :param rows: row index of each observed entry (an embedding counts once per entry).
        """
        weights = (self.side_proj**2).sum((1, 2)) + (self.col_emb**2).sum((1, 2))
        for layer in self.mlp:
            if isinstance(layer, _BatchedLinear):
                weights = weights + (layer.weight**2).sum((1, 2))
        return weights.sum(), (self.row_emb[:, rows] ** 2).sum((1, 2)).sum()


def fit_ncf(
    rows: np.ndarray,
    cols: np.ndarray,
    y: np.ndarray,
    side: np.ndarray,
    n_cols: int,
    config: NcfConfig = NcfConfig(),
    seed: int = 0,
) -> np.ndarray:
    """Train the NCF ensemble on the observed entries and predict every entry.

    :param rows: row index of each observed entry.
    :param cols: column index of each observed entry.
    :param y: observed values (standardised per column is best).
    :param side: ``(n_rows, side_dim)`` side features of every row, standardised.
    :param n_cols: columns of the matrix.
    :param config: hyper-parameters.
    :param seed: initialisation.
    :returns: ``(n_rows, n_cols)`` predictions, the ensemble mean.
    """
    n_rows = side.shape[0]
    _check(rows, cols, y, n_rows, n_cols)
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        net = NcfMlp(n_rows, n_cols, side.shape[1], config)
    finally:
        # Leave the caller's global torch stream as it was: completion must not perturb training.
        torch.random.set_rng_state(gen_state)
    threads = torch.get_num_threads()
    # The tensors are tiny: extra threads only add synchronisation overhead.
    torch.set_num_threads(1)
    try:
        out = _train(net, rows, cols, y, side, config)
    finally:
        torch.set_num_threads(threads)
    return out.reshape(n_rows, n_cols).numpy().astype(np.float64)


def _train(
    net: NcfMlp, rows: np.ndarray, cols: np.ndarray, y: np.ndarray, side: np.ndarray, config: NcfConfig
) -> torch.Tensor:
    """Fit ``net`` full-batch and return its ensemble-mean prediction of every entry, flat."""
    r, c = torch.as_tensor(rows, dtype=torch.long), torch.as_tensor(cols, dtype=torch.long)
    s = torch.as_tensor(side, dtype=torch.float32)
    t = torch.as_tensor(y, dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=config.lr)
    n = float(y.size)
    for _ in range(config.epochs):
        opt.zero_grad()
        # Sum over the ensemble: the networks are independent, each sees its own mean loss.
        sq = ((net(r, c, s) - t) ** 2).mean(-1).sum()
        w2, e2 = net.penalty(r)
        (sq + (config.weight_decay * w2 + config.emb_l2 * e2) / n).backward()
        opt.step()
    grid_r, grid_c = _grid(side.shape[0], net.col_emb.shape[1])
    with torch.no_grad():
        return net(grid_r, grid_c, s).mean(0)


def _grid(n_rows: int, n_cols: int) -> tuple[torch.Tensor, torch.Tensor]:
    rr, cc = torch.meshgrid(torch.arange(n_rows), torch.arange(n_cols), indexing="ij")
    return rr.reshape(-1), cc.reshape(-1)


def standardise(x: np.ndarray, axis: int = 0, eps: float = 1e-8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(x - mean) / std`` along ``axis``, with the mean and std (std floored at ``eps``).

    :param x: array.
    :param axis: axis to reduce.
    :param eps: smallest std, so constant columns do not divide by zero.
    """
    m = x.mean(axis=axis, keepdims=True)
    s = np.maximum(x.std(axis=axis, keepdims=True), eps)
    return (x - m) / s, m, s
