"""``rlsched finetune``: carry a trained LDWP network to another cluster, zero-shot then fine-tuned.

The network scores nodes one at a time, so it runs on a cluster of any size and GPU mix as is —
no new input or output layer, unlike the paper's per-node output. This evaluates it there first
(zero-shot, next to ``mct`` on the same held-out seeds), then continues DQN from its weights.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

from experiments.configs import FinetuneConfig
from experiments.evaluation import load_entry
from experiments.train import TrainConfig, TrainingInterrupted, train
from experiments.train_evaluation import best_evaluation, evaluate, evaluate_selector
from rlsched.policies.selectors import MctSelector
from rlsched.scorer_io import scorer_from_checkpoint


def finetune(
    source: str | Path,
    scenario: str,
    out: str | Path,
    steps: int = FinetuneConfig.steps,
    seed: int = FinetuneConfig.seed,
    rate_per_min: float | None = None,
) -> dict[str, Any]:
    """Zero-shot evaluation, fine-tuning and a report (``transfer.json`` in ``out``).

    :param source: checkpoint directory of the trained network.
    :param scenario: the target scenario (built-in name, path, or ``NAME[@RATE][#TASKS]``).
    :param out: output directory (as for ``rlsched train``, plus ``transfer.json``).
    :param steps: DQN steps on the target.
    :param seed: training seed.
    :param rate_per_min: arrival-rate override for the target.
    """
    net, meta = scorer_from_checkpoint(source)
    cfg = TrainConfig(
        scenario=scenario,
        rate_per_min=rate_per_min,
        steps=steps,
        seed=seed,
        pretrain=None,
        net_arch=tuple(meta["net_arch"]),
    )
    sc = load_entry(scenario, rate_per_min, "--scenario")
    seeds = f"validation seeds {cfg.eval_seeds[0]}-{cfg.eval_seeds[-1]}"
    # On the thread count training evaluates on: a greedy network's near-ties can fall the other
    # way on another count, and step 0 (the same weights) read 1 % below the zero-shot figure.
    torch.set_num_threads(cfg.threads)
    # Both evaluations run whole episodes before training starts (about 100 s on 2 cores): say so.
    _say(f"finetune: zero-shot evaluation of {source} on {sc.name} ({seeds})...")
    zero_shot = evaluate(net, sc, cfg)
    _say(f"finetune: zero-shot {_figures(zero_shot)}; now mct on the same seeds...")
    mct = evaluate_selector(MctSelector(), sc, cfg)
    _say(f"finetune: mct {_figures(mct)}; fine-tuning for {steps:,} steps")
    # A new run from the source's weights: --steps counts fine-tuning steps, not the source's.
    try:
        summary = train(cfg, out, start_weights=source)
    except TrainingInterrupted as e:
        # finetune has no --resume: training's own command continues from the weights it saved.
        raise KeyboardInterrupt(
            f"{e}; rlsched train --scenario {scenario} --resume {e.saved} --out {out} --steps {steps} "
            "goes on from them (a training run: no transfer.json)"
        ) from None
    history = summary["best"]
    best = best_evaluation(history)  # the network best/ holds
    report = {
        "source": str(source),
        "source_scenario": meta.get("scenario"),
        "target_scenario": scenario,
        "target_nodes": len(sc.cluster.nodes),
        "seeds": list(cfg.eval_seeds),
        "zero_shot": zero_shot,
        "mct": mct,
        "fine_tuned_last": summary["after_dqn"],
        "fine_tuned_best": best,
        "history": history,
    }
    Path(out, "transfer.json").write_text(json.dumps(report, indent=1))
    return report


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _figures(ev: dict[str, float]) -> str:
    return f"{ev['throughput_per_min']:,.1f} tasks/min, p95 {ev['latency_p95_s']:.1f} s"
