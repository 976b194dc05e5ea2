"""Each GPU-capable kernel's peak allocation while it runs, per byte of its inputs (NumPy,
``tracemalloc``), against the table the live runtime reserves from
(:data:`runtime.kernels.working_memory.PEAK_PER_INPUT_BYTE`). A script, not a test::

    python -m experiments.benchmarks.kernel_memory
"""

from __future__ import annotations

import argparse
import math
import platform

import numpy as np

from runtime.kernels.working_memory import MARGIN, PEAK_PER_INPUT_BYTE, measure_peaks


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m experiments.benchmarks.kernel_memory", description=(__doc__ or "").split("\n\n")[0]
    ).parse_args(argv)
    print("# command: python -m experiments.benchmarks.kernel_memory")
    print(f"# machine: {platform.machine()}, python {platform.python_version()}, numpy {np.__version__}")
    print("\n| kind | measured peak / input bytes | table (measured x MARGIN, rounded up) | shipped |")
    print("|---|---|---|---|")
    for kind, per in sorted(measure_peaks().items()):
        table = math.ceil(per * MARGIN * 10) / 10
        print(f"| {kind} | {per:.2f} | {table:.1f} | {PEAK_PER_INPUT_BYTE.get(kind, float('nan')):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
