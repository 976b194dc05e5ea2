"""PNG figures of evaluation reports (matplotlib, no display needed)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI

import matplotlib.pyplot as plt
import numpy as np
from matplotlib import ticker

from experiments.report_stats import Summary

#: Longest figure-file stem (file systems allow 255 bytes; the figures add a suffix).
STEM_MAX = 80


def figure_stem(text: str) -> str:
    """A file-name stem for ``text`` (a scenario's name or path), unique per text: a long one
    keeps its end (the case's own name) behind a hash of the whole, so cases under one deep
    folder do not share figure files."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"
    if len(slug) <= STEM_MAX:
        return slug
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    tail = slug[-(STEM_MAX - len(digest) - 1) :].lstrip("-")
    return f"{digest}-{tail}"


_DPI = 100


def _save(fig: plt.Figure, path: Path, tight: bool = True) -> Path:
    if tight:
        fig.tight_layout()
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


def bars_with_intervals(
    path: Path,
    title: str,
    panels: Sequence[tuple[str, dict[str, Summary], float | None]],
) -> Path:
    """One bar panel per metric: mean per scheduler with its 95 % interval over seeds.

    :param panels: (y label, scheduler -> summary, reference line or ``None``) per panel.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    for ax, (label, by_sched, ref) in zip(axes[0], panels, strict=True):
        names = list(by_sched)
        mean = [by_sched[n].mean for n in names]
        err = np.array([by_sched[n].errors() for n in names]).T  # (below, above) per bar
        ax.bar(range(len(names)), mean, yerr=err, capsize=4, color="#4878a8")
        if ref is not None:
            ax.axhline(ref, color="#c03030", linestyle="--", label="throughput bound")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def latency_cdf(
    path: Path, title: str, latencies: Mapping[str, Sequence[float]], bound: Sequence[float], bound_label: str
) -> Path:
    """Empirical CDF of task latency per scheduler (pooled over seeds), and of the lower bounds."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for name, lat in latencies.items():
        if len(lat):
            x = np.sort(np.asarray(lat))
            ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=name)
    if len(bound):
        x = np.sort(np.asarray(bound))
        ax.step(
            x,
            np.arange(1, len(x) + 1) / len(x),
            where="post",
            color="black",
            linestyle=":",
            label=bound_label,
        )
    ax.set_xscale("log")
    # 1-2-5 ticks in plain numbers; matplotlib's default labels minor ticks and overlaps them.
    ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel("task latency, s (log)")
    ax.set_ylabel("share of tasks")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=11)
    return _save(fig, path)


def device_utilisation(
    path: Path, title: str, series: Mapping[str, tuple[Sequence[float], Sequence[Sequence[float]]]]
) -> Path:
    """Per scheduler, a devices x time map of the share of samples each GPU was busy.

    Every map shares one colour scale and so one colour bar; the grid is laid out by fixed
    margins, not ``tight_layout``, whose search over every axis took most of a report's time
    (3.9 s for 38 schedulers, 1.7 s now: ``experiments.benchmarks.bench_report_figures``; one such
    figure per scenario).
    """
    names = [n for n, (t, u) in series.items() if len(t) and len(u)]
    cols = min(3, max(1, len(names)))
    rows = max(1, -(-len(names) // cols))
    height = 3.0 * rows + 0.9
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols + 1.0, height), squeeze=False)
    # Fixed margins in inches, whatever the number of rows: room for the title and the labels.
    fig.subplots_adjust(
        left=0.6 / fig.get_figwidth(),
        right=1 - 1.1 / fig.get_figwidth(),
        top=1 - 0.6 / height,
        bottom=0.45 / height,
        wspace=0.3,
        hspace=0.55 if rows > 1 else 0.2,
    )
    for ax in axes.flat:
        ax.set_visible(False)
    im = None
    for ax, name in zip(axes.flat, names, strict=False):
        t, u = series[name]
        ax.set_visible(True)
        im = ax.imshow(
            np.asarray(u, dtype=float),
            aspect="auto",
            interpolation="nearest",
            vmin=0,
            vmax=1,
            cmap="viridis",
            extent=(float(t[0]), float(t[-1]), len(u) - 0.5, -0.5),
        )
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("simulated time, s", fontsize=8)
        ax.set_ylabel("GPU", fontsize=8)
        ax.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
    if im is not None:
        width = fig.get_figwidth()
        # Beside the first row, as tall as it: the scale is the same for every map below.
        tall = min(height - 1.05, 2.55)
        cax = fig.add_axes((1 - 0.8 / width, 1 - (0.6 + tall) / height, 0.15 / width, tall / height))
        bar = fig.colorbar(im, cax=cax)
        bar.set_label("share of samples busy", fontsize=8)
    fig.suptitle(title, fontsize=11, y=1 - 0.15 / height, va="top")
    return _save(fig, path, tight=False)


def curves(
    path: Path, title: str, xlabel: str, ylabel: str, series: Mapping[str, Sequence[tuple[float, float]]]
) -> Path:
    """Line chart of (x, y) points per series (learning and transfer curves)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for name, pts in series.items():
        if pts:
            x, y = zip(*pts, strict=True)
            ax.plot(x, y, marker="o", markersize=3, label=name)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=11)
    return _save(fig, path)


def throughput_over_time(
    path: Path,
    title: str,
    series: Mapping[str, tuple[np.ndarray, np.ndarray]],
    changes: Sequence[float],
) -> Path:
    """Windowed throughput over simulated time per scheduler, with the cluster's changes marked."""
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, (t, thr) in series.items():
        ax.plot(t, thr, label=name, linewidth=1.2)
    for i, c in enumerate(changes):
        ax.axvline(
            c, color="grey", linestyle="--", linewidth=0.8, label="nodes join/leave" if i == 0 else None
        )
    ax.set_xlabel("simulated time, s")
    ax.set_ylabel("tasks/min (sliding window)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title, fontsize=11)
    return _save(fig, path)


def versus_rate(
    path: Path, title: str, panels: Sequence[tuple[str, Mapping[str, Sequence[tuple[float, Summary]]]]]
) -> Path:
    """One panel per metric: mean and 95 % interval against the arrival rate, per scheduler."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5.8 * len(panels), 4.2), squeeze=False)
    for ax, (label, by_sched) in zip(axes[0], panels, strict=True):
        for name, pts in by_sched.items():
            x = [r for r, _ in pts]
            y = [s.mean for _, s in pts]
            e = np.array([s.errors() for _, s in pts]).T
            ax.errorbar(x, y, yerr=e, marker="o", markersize=3, capsize=3, label=name)
        ax.set_xlabel("arrival rate, tasks/min")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def latency_vs_load(
    path: Path,
    title: str,
    panels: Sequence[tuple[str, Mapping[str, tuple[list[float], list[Summary]]], list[float]]],
    loads_floor: list[float],
    knees: Mapping[str, float | None],
) -> Path:
    """One panel per latency statistic against offered load: each scheduler's mean over seeds
    with its 95 % interval (never drawn below the lower bound), the lower bound, and a cross
    where each scheduler stops keeping up.

    :param panels: (y label, scheduler -> (loads, summary over seeds per load), lower bound per
        load of ``loads_floor``).
    :param loads_floor: the loads of the lower bound's points.
    :param knees: scheduler -> the load at which it stops keeping up (``None``: never on the grid).
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.4), squeeze=False)
    for ax, (label, by_sched, floor) in zip(axes[0], panels, strict=True):
        lb = dict(zip(loads_floor, floor, strict=True))
        for name, (loads, pts) in by_sched.items():
            y = np.array([s.mean for s in pts])
            below = np.array([s.errors()[0] for s in pts])
            above = np.array([s.errors()[1] for s in pts])
            low = np.maximum(y - below, [lb.get(x, 0.0) for x in loads])  # no interval below the bound
            line = ax.errorbar(
                loads,
                y,
                yerr=[y - np.minimum(low, y), above],
                marker="o",
                markersize=3,
                capsize=3,
                label=name,
            )
            knee = knees.get(name)
            if knee is not None:
                ax.plot([knee], [y[loads.index(knee)]], "x", markersize=10, color=line[0].get_color())
        if floor:
            ax.plot(loads_floor, floor, "k--", linewidth=1, label="lower bound (fastest critical path)")
        ax.set_yscale("log")
        # 1-2-5 ticks in plain numbers: matplotlib's default labels minor ticks as 6x10^0 and
        # overlaps them on a short log range.
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.set_xlabel("offered load")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(f"{title}  (x: stops keeping up)", fontsize=11)
    return _save(fig, path)


def ratio_ecdf(
    path: Path,
    title: str,
    panels: Sequence[tuple[str, Mapping[str, tuple[Sequence[float], int]], Sequence[float]]],
) -> Path:
    """One panel per ratio: each pair's ratios over cases, sorted, as an empirical CDF, with
    reference lines. A pair's curve ends below 1 by the share of its cases that have no ratio.

    :param panels: (x label, pair -> (its ratios, its cases), reference ratios: the first dashed,
        the rest dotted) per panel.
    """
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 4.4), squeeze=False)
    # One colour per pair in every panel.
    colour = {name: f"C{i}" for i, name in enumerate(dict.fromkeys(n for _, by, _ in panels for n in by))}
    for ax, (label, by_pair, refs) in zip(axes[0], panels, strict=True):
        drawn = False
        for name, (ratios, cases) in by_pair.items():
            if len(ratios) and cases:
                x = np.sort(np.asarray(ratios, dtype=float))
                y = np.arange(1, len(x) + 1) / cases
                ax.step(x, y, where="post", marker=".", color=colour[name], label=name)
                drawn = True
        if not drawn:
            ax.text(0.5, 0.5, "no cases", transform=ax.transAxes, ha="center", color="grey")
        for i, ref in enumerate(refs):
            style = "--" if i == 0 else ":"
            ax.axvline(ref, color="#c03030", linestyle=style, linewidth=1, label=f"{ref:g}×")
        ax.set_xlabel(label)
        ax.set_ylabel("share of cases at or below")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=11)
    return _save(fig, path)
