"""Minimal SVG line charts for reports (no plotting dependency)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e")


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    title: str,
    xlabel: str,
    ylabel: str,
    width: int = 720,
    height: int = 360,
) -> str:
    """An SVG document plotting each named series of (x, y) points as a line with markers."""
    pts = [p for s in series.values() for p in s]
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    pad = (y1 - y0) * 0.1 or 1.0
    y0, y1 = (max(y0 - pad, 0.0) if y0 >= 0 else y0 - pad), y1 + pad
    left, right, top, bottom = 60, 210, 40, 50
    pw, ph = width - left - right, height - top - bottom

    def sx(x: float) -> float:
        return left + (x - x0) / ((x1 - x0) or 1.0) * pw

    def sy(y: float) -> float:
        return top + (1 - (y - y0) / (y1 - y0)) * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" stroke="black"/>',
        f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle">{escape(xlabel)}</text>',
        f'<text x="15" y="{top + ph / 2}" text-anchor="middle" transform="rotate(-90 15 {top + ph / 2})">'
        f"{escape(ylabel)}</text>",
    ]
    for i in range(5):
        yv = y0 + (y1 - y0) * i / 4
        xv = x0 + (x1 - x0) * i / 4
        out.append(f'<text x="{left - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.1f}</text>')
        out.append(f'<text x="{sx(xv):.1f}" y="{top + ph + 16}" text-anchor="middle">{xv:,.0f}</text>')
    for k, (name, s) in enumerate(series.items()):
        c = COLOURS[k % len(COLOURS)]
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        out.append(f'<polyline points="{path}" fill="none" stroke="{c}" stroke-width="2"/>')
        out += [f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{c}"/>' for x, y in s]
        ly = top + 10 + 18 * k
        lx = left + pw + 10
        out.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 20}" y2="{ly}" stroke="{c}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 35}" y="{ly + 4}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out)
