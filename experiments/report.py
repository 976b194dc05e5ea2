"""Training reports: compare runs' evaluation curves (``history.json``) as a table and an SVG plot.

python -m experiments.report --run "with BC=runs/a" --run "no pretraining=runs/b" --svg out.svg
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from experiments.plot import line_chart


def load_history(run_dir: str | Path) -> list[dict[str, float]]:
    """The evaluations a training run recorded, in order."""
    return json.loads(Path(run_dir, "history.json").read_text())


def table(runs: dict[str, list[dict[str, float]]]) -> str:
    """Markdown: one row per evaluation step, throughput and p95 per run."""
    steps = sorted({h["step"] for hs in runs.values() for h in hs})
    head = "| DQN step | " + " | ".join(f"{n}: tasks/min | {n}: p95 s" for n in runs) + " |"
    rows = [head, "|" + "---|" * (1 + 2 * len(runs))]
    for s in steps:
        cells = [f"{s:,.0f}"]
        for hs in runs.values():
            h = [x for x in hs if x["step"] == s]
            cells += (
                [f"{h[-1]['throughput_per_min']:.2f}", f"{h[-1]['latency_p95_s']:.1f}"] if h else ["", ""]
            )
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", action="append", required=True, help="NAME=DIR of a training run (repeatable)")
    p.add_argument("--svg", default=None, help="write the throughput curves here")
    p.add_argument("--title", default="Evaluation throughput during DQN")
    args = p.parse_args()
    runs = {}
    for spec in args.run:
        name, _, d = spec.partition("=")
        runs[name] = load_history(d)
    print(f"# command: python -m experiments.report {' '.join(sys.argv[1:])}")
    print(table(runs))
    if args.svg:
        # Keep the last evaluation of each step (the final one repeats the last periodic one).
        series = {
            n: sorted({h["step"]: h["throughput_per_min"] for h in hs}.items()) for n, hs in runs.items()
        }
        Path(args.svg).write_text(line_chart(series, args.title, "DQN steps", "tasks/min (held-out seeds)"))


if __name__ == "__main__":
    main()
