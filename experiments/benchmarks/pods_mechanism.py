"""Which part of an ``alibaba-pods`` case makes the learned selector win there (a script, not a test).

LDWP beats the ``mct`` family on the generated ``alibaba-pods`` cases and on no other family. A
pods case differs from the others in its fleet (nodes sampled from the trace: mostly eight-GPU
``G2`` servers) and its workload (trace pods: one subtask each, fractional GPU shares, long runs).
This writes each ``alibaba-pods`` case of the given sets again with one part swapped, each set
back to the case's own offered load:

- ``orig``: as generated;
- ``cap1``: every trace node with one GPU (the same models and pods);
- ``apps``: the same nodes, kernel and video apps arriving Poisson instead of pods;
- ``cat48`` / ``cat12``: the pods on a fleet of catalog models (the trace's G2, P100, T4 and one
  to three drawn ones) written as a node list, four or eight GPUs a node, or one or two.

Then evaluate each folder with the same pairs and read the ratios::

    python -m experiments.benchmarks.pods_mechanism write --out mech gen-train gen-train2
    for v in orig cap1 apps cat48 cat12; do
      rlsched evaluate --scenarios mech/$v --seeds 2 --first-seed 5000 --out mech-$v \\
        --schedulers ldwp+iawp,mct-drain+iawp,mct-mem+iawp,mct-drain+iawp-pass
    done
    python -m experiments.benchmarks.pods_mechanism read mech-orig mech-cap1 mech-apps mech-cat48 mech-cat12
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from experiments.scenario_gen import fleet
from experiments.scenario_gen import workload as wk
from experiments.scenario_gen.generate import portable
from experiments.scenario_gen.load import set_load
from experiments.scenario_gen.trace_data import NODE_LIST, trace_file
from rlsched.scenarios import traces
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.spec import Scenario, WorkloadSpec
from rlsched.scenarios.writer import dump_scenario

VARIANTS: tuple[str, ...] = ("orig", "cap1", "apps", "cat48", "cat12")
#: (A, B) throughput ratios the read step prints.
RATIOS: tuple[tuple[str, str], ...] = (
    ("ldwp+iawp", "mct-drain+iawp"),
    ("ldwp+iawp", "mct-mem+iawp"),
    ("mct-drain+iawp", "mct-drain+iawp-pass"),
)
_HEADER = "sn,cpu_milli,memory_mib,gpu,model"


def _writer(folder: Path, name: str) -> Callable[[Scenario], Scenario]:
    def write(sc: Scenario) -> Scenario:
        path = folder / f"{name}.toml"
        path.write_text(portable(dump_scenario(sc)), encoding="utf-8")
        return load_scenario(str(path))

    return write


def _on_node_list(sc: Scenario, node_csv: Path, nodes: int) -> Scenario:
    """``sc``'s pods on the nodes of ``node_csv`` (``nodes`` sampled; 0: all)."""
    assert sc.workload.alibaba is not None
    ali = dataclasses.replace(sc.workload.alibaba, node_csv=str(node_csv.resolve()), nodes=nodes)
    cluster = dataclasses.replace(sc.cluster, nodes=traces.alibaba_cluster(ali, sc.seed).nodes)
    return dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, alibaba=ali), cluster=cluster)


def _catalog_list(rng: np.random.Generator, nodes: int, gpus: tuple[int, ...]) -> str:
    models = list(dict.fromkeys(["G2", "P100", "T4", *fleet.pick_models(rng, int(rng.integers(1, 4)))]))
    lines = [_HEADER]
    for model, count in zip(models, fleet.split(rng, max(nodes, len(models)), len(models)), strict=True):
        g = int(rng.choice(gpus))
        lines += [f"{model.lower()}-{len(lines)},{g * 12000},{g * 49152},{g},{model}" for _ in range(count)]
    return "\n".join(lines) + "\n"


def variants(sc: Scenario, seed: int, out: Path, cap1_csv: Path) -> dict[str, Scenario]:
    """The five variants of one pods case (data files they need are written under ``out``)."""
    assert sc.workload.alibaba is not None
    rng = np.random.default_rng(seed)
    apps = wk.app_shares(rng, wk.KERNEL_APPS + wk.VIDEO_APPS, 0.5)
    renamed = tuple(dataclasses.replace(n, name=f"tr{i}-0") for i, n in enumerate(sc.cluster.nodes))
    wl = WorkloadSpec(tasks=min(sc.workload.tasks, 1500), apps=apps, arrival=wk.poisson(60.0))
    out_v = {
        "orig": sc,
        "cap1": _on_node_list(sc, cap1_csv, sc.workload.alibaba.nodes),
        "apps": dataclasses.replace(sc, workload=wl, cluster=dataclasses.replace(sc.cluster, nodes=renamed)),
    }
    for name, gpus in (("cat48", (4, 8)), ("cat12", (1, 2))):
        path = out / name / f"nodes-{sc.name}.csv"
        path.write_text(_catalog_list(np.random.default_rng(seed + 1), len(sc.cluster.nodes), gpus))
        out_v[name] = _on_node_list(sc, path, 0)
    return out_v


def write(out: Path, sets: Sequence[str]) -> None:
    """Every variant of every ``alibaba-pods`` case of ``sets`` into ``out/<variant>/``."""
    for v in VARIANTS:
        (out / v).mkdir(parents=True, exist_ok=True)
    rows = (trace_file(NODE_LIST)).read_text(encoding="utf-8-sig").splitlines()
    cols = rows[0].split(",")
    gpu = cols.index("gpu")
    cap1 = out / "cap1" / "nodes-one-gpu.csv"
    cap1.write_text(
        "\n".join(
            [rows[0]]
            + [",".join(c if i != gpu else "1" for i, c in enumerate(r.split(","))) for r in rows[1:]]
        )
        + "\n"
    )
    for folder in sets:
        for case in json.loads((Path(folder) / "cases.json").read_text())["cases"]:
            if case["family"] != "alibaba-pods":
                continue
            sc = load_scenario(str(Path(folder) / case["file"]))
            for v, variant in variants(sc, case["seed"], out, cap1).items():
                got = set_load(variant, case["offered_load"], _writer(out / v, sc.name)).offered_load
                print(f"{v:6s} {sc.name:24s} offered load {got:.3f} (case {case['offered_load']:.3f})")


def read(folders: Sequence[str]) -> None:
    """Geometric mean (least, most) over cases of each ratio of :data:`RATIOS`, per folder."""
    for folder in folders:
        means: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in json.loads((Path(folder) / "results.json").read_text())["rows"]:
            if r["status"] == "ok":
                means[r["scenario"]][r["scheduler"]].append(r["throughput"])
        parts = []
        for a, b in RATIOS:
            logs = [math.log(np.mean(d[a]) / np.mean(d[b])) for d in means.values() if a in d and b in d]
            if logs:
                g, lo, hi = math.exp(np.mean(logs)), math.exp(min(logs)), math.exp(max(logs))
                parts.append(f"{a} / {b} {g:.3f} ({lo:.2f}-{hi:.2f}, {len(logs)} cases)")
        print(f"{folder}: " + "; ".join(parts))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    w = sub.add_parser("write", help="write the variants")
    w.add_argument("--out", required=True, type=Path)
    w.add_argument("sets", nargs="+", help="generated sets (folders with cases.json)")
    r = sub.add_parser("read", help="read the evaluated variants")
    r.add_argument("folders", nargs="+", help="rlsched evaluate folders")
    args = parser.parse_args(argv)
    print(
        "$ python -m experiments.benchmarks.pods_mechanism "
        + shlex.join(sys.argv[1:] if argv is None else argv)
    )
    if args.step == "write":
        write(args.out, args.sets)
    else:
        read(args.folders)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
