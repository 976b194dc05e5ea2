"""Scheduler names that more than one policy module needs (kept apart so neither imports the other)."""

#: The scheduler that recognises the case and runs the pair it wants (:mod:`rlsched.policies.auto`).
AUTO = "auto"

#: Arrivals before ``auto``'s second decision, by default (switching after 100-200 recovered most
#: of the right pair's throughput: ``experiments/benchmarks/late_switch.py``).
REVISIT_AT = 200
#: The pairs a second decision may switch to, by default: the selectors that win where ``auto``'s
#: first choice loses on validation (``mlsm``, ``mct-stream``), the first decision's two most
#: chosen heuristic pairs, and the learned pair of the Alibaba-like cases.
REVISIT_TARGETS: tuple[str, ...] = (
    "mlsm+iawp-pass",
    "mct-stream+iawp-pass",
    "mct-drain+iawp-pass",
    "mct+iawp-pass",
    "ldwp+speedup",
)
