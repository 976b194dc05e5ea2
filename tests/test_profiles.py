"""Kind × metric resource profiles: the simulated profiler, completion and cosine similarity."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from envs.simulated_kind_profiles import profile_kinds, true_profiles
from models.profile_completion import SvdConfig, fit_column_mean, fit_ncf, fit_svd
from rlsched.interference.kind_profiles import (
    METRICS,
    ProfileSamples,
    complete_profiles,
    cosine_similarity,
    kind_cost_features,
    nominal_speedup,
)
from rlsched.workloads import KINDS

ALL = list(KINDS.values())
NAMES = [k.name for k in ALL]


def test_profiler_measures_two_distinct_metrics_per_kind_within_noise() -> None:
    noise = 0.02
    s = profile_kinds(ALL, 2, rng=3, noise=noise)
    assert Counter(s.kinds) == dict.fromkeys(NAMES, 2)
    pairs = set(zip(s.kinds, s.metric, strict=True))
    assert len(pairs) == 2 * len(ALL)
    truth = true_profiles(ALL)
    exact = truth[[NAMES.index(k) for k in s.kinds], [METRICS.index(m) for m in s.metric]]
    ratio = np.log(s.value / exact)
    # 42 draws of N(0, 0.02): all within 5 sigma, and not all exact (the noise is really there).
    assert np.all(np.abs(ratio) < 5 * noise)
    assert np.std(ratio) > noise / 3


def test_profiler_without_noise_reads_the_truth_and_covers_every_metric() -> None:
    s = profile_kinds(ALL, 2, rng=0, noise=0.0)
    m = s.matrix(NAMES)
    seen = ~np.isnan(m)
    np.testing.assert_allclose(m[seen], true_profiles(ALL)[seen], rtol=1e-12)
    # Balanced choice: 42 measurements over 6 metrics, exactly 7 each.
    assert seen.sum(axis=0).tolist() == [7] * len(METRICS)


def test_profiler_draws_differ_by_seed_and_repeat_by_seed() -> None:
    a, b, c = (profile_kinds(ALL, 2, rng=r) for r in (1, 1, 2))
    assert a.metric == b.metric and np.array_equal(a.value, b.value)
    assert a.metric != c.metric


def test_true_profiles_are_in_range() -> None:
    t = true_profiles(ALL)
    assert t.shape == (len(ALL), len(METRICS))
    assert np.all((t[:, :4] > 0) & (t[:, :4] <= 1))
    assert np.all(t[:, 4:] > 0)
    # Compute-bound matmul gains more from a GPU than memory-bound frame differencing.
    assert t[NAMES.index("matmul"), 5] > 2 * t[NAMES.index("frame_diff"), 5]


@pytest.mark.parametrize("method", ["ncf", "svd", "mean"])
def test_completion_keeps_observed_entries_and_fills_the_rest(method: str) -> None:
    s = profile_kinds(ALL, 2, rng=4)
    observed = s.matrix(NAMES)
    seen = ~np.isnan(observed)
    out = complete_profiles(s, ALL, method, seed=0)  # type: ignore[arg-type]
    assert out.shape == (len(ALL), len(METRICS))
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out[seen], observed[seen], rtol=1e-12)
    assert np.all((out[:, :4] >= 0) & (out[:, :4] <= 1)) and np.all(out[:, 4:] > 0)


def test_completion_averages_repeated_measurements_and_covers_unmeasured_metrics() -> None:
    kinds = ALL[:3]
    names = [k.name for k in kinds]
    metric = ["sm", "sm", "l2", "dram", "pcie", "cpu_eff", "speedup"]
    value = np.array([0.2, 0.4, 0.3, 0.5, 0.1, 0.8, 100.0])
    s = ProfileSamples([names[0], names[0], names[0], names[1], names[1], names[2], names[2]], metric, value)
    out = complete_profiles(s, kinds, "mean")
    assert out[0, METRICS.index("sm")] == pytest.approx(0.3)
    # Speedups average geometrically (completion works on their log); other kinds are ignored.
    more = ProfileSamples(
        [*s.kinds, names[2], "elsewhere"], [*s.metric, "speedup", "sm"], np.array([*value, 400.0, 0.9])
    )
    m = more.matrix(names)
    assert m[2, METRICS.index("speedup")] == pytest.approx(200.0)
    assert m[0, METRICS.index("sm")] == pytest.approx(0.3)
    # Speedup measured on no kind: the nominal roofline speedup stands in; the rest is completed.
    partial = complete_profiles(ProfileSamples(s.kinds[:6], s.metric[:6], s.value[:6]), kinds, "ncf")
    np.testing.assert_allclose(partial[:, METRICS.index("speedup")], nominal_speedup(kinds))
    assert partial[1, METRICS.index("sm")] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="none of the samples"):
        complete_profiles(ProfileSamples(["elsewhere"], ["sm"], np.array([0.5])), kinds, "mean")
    with pytest.raises(ValueError, match="unknown completion method"):
        complete_profiles(s, kinds, "knn")  # type: ignore[arg-type]


def test_profile_samples_reject_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown metrics"):
        ProfileSamples(["gmm"], ["ipc"], np.array([1.0]))
    with pytest.raises(ValueError, match="one length"):
        ProfileSamples(["gmm", "fft"], ["sm"], np.array([1.0]))
    with pytest.raises(ValueError, match="positive"):
        ProfileSamples(["gmm"], ["sm"], np.array([-0.1]))


def test_kind_features_are_public_and_standardised() -> None:
    x = kind_cost_features(ALL)
    assert x.shape[0] == len(ALL) and np.all(np.isfinite(x))
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-9)


def _synthetic(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A rank-2 matrix driven by side features, with small row-specific residuals, plus the
    side features and a mask of two observed columns per row."""
    rng = np.random.default_rng(seed)
    side = rng.normal(size=(rows, 5))
    u = side @ rng.normal(size=(5, 2)) / np.sqrt(5) + 0.1 * rng.normal(size=(rows, 2))
    y = u @ rng.normal(size=(2, 6)) + rng.normal(size=6)
    observed = np.zeros((rows, 6), dtype=bool)
    for r in range(rows):
        observed[r, rng.choice(6, size=2, replace=False)] = True
    return y, side, observed


def test_ncf_beats_column_mean_on_low_rank_matrix_with_side_information() -> None:
    y, side, observed = _synthetic(40, seed=0)
    rows, cols = np.nonzero(observed)
    hidden = ~observed
    ncf = fit_ncf(rows, cols, y[rows, cols], side, 6, seed=0)
    mean = fit_column_mean(rows, cols, y[rows, cols], 40, 6)
    err_ncf = np.abs(ncf - y)[hidden].mean()
    err_mean = np.abs(mean - y)[hidden].mean()
    assert err_ncf < 0.7 * err_mean, (err_ncf, err_mean)


def test_svd_fits_a_dense_low_rank_matrix() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(size=(12, 1)) @ rng.normal(size=(1, 6)) + rng.normal(size=6)
    rows, cols = np.nonzero(np.ones_like(y, dtype=bool))
    pred = fit_svd(rows, cols, y[rows, cols], 12, 6, SvdConfig(rank=1, reg=0.0, epochs=400), seed=0)
    assert np.abs(pred - y).mean() < 0.1 * np.abs(y - y.mean(axis=0)).mean()


def test_ncf_leaves_the_global_torch_generator_alone() -> None:
    y, side, observed = _synthetic(10, seed=2)
    rows, cols = np.nonzero(observed)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    fit_ncf(rows, cols, y[rows, cols], side, 6, seed=5)
    assert torch.equal(torch.rand(3), expected)


def test_cosine_similarity_is_symmetric_with_unit_diagonal() -> None:
    p = complete_profiles(profile_kinds(ALL, 2, rng=0), ALL, "mean")
    sim = cosine_similarity(p)
    assert sim.shape == (len(ALL), len(ALL))
    np.testing.assert_allclose(sim, sim.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(sim), 1.0)
    assert np.all(sim <= 1.0) and np.all(sim >= 0.0)


def test_cosine_similarity_values() -> None:
    v = np.array([[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    sim = cosine_similarity(v, metrics=None)
    assert sim[0, 1] == pytest.approx(1.0) and sim[0, 2] == pytest.approx(0.0)
    assert sim[3, 3] == 1.0 and sim[3, 0] == 0.0
    # Named metrics select columns: only the GPU resources count by default.
    p = np.array([[0.5, 0.1, 0.1, 0.1, 0.9, 10.0], [0.5, 0.1, 0.1, 0.1, 0.1, 900.0]])
    assert cosine_similarity(p)[0, 1] == pytest.approx(1.0)
    assert cosine_similarity(p, metrics=("sm", "cpu_eff"))[0, 1] < 0.8
