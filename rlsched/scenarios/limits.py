"""Bounds of the values a scenario file may hold, checked at load so a typo cannot hang a run or
exhaust memory (the largest built-in, alibaba-full, has 1,213 nodes and 7,255 pods). The live
cluster file and the service's cluster API share the per-node bounds."""

from __future__ import annotations

#: Arrival rates the paper evaluates, tasks/min; ``--rate`` on the ``paper`` scenario must lie in it.
RATE_RANGE: tuple[float, float] = (10.0, 60.0)
#: Largest arrival rate (tasks/min) any scenario or ``--rate`` may ask for: 10^6/min is ~16,700
#: arrivals per simulated second, far beyond any built-in (the largest asks 9,000/min).
MAX_RATE_PER_MIN = 1_000_000.0
#: ``--rate`` on a scenario other than ``paper`` may ask up to this many times its own rate.
RATE_FACTOR = 100.0
#: Nodes in a cluster, all groups together (and ``workload.alibaba.nodes``).
MAX_NODES = 10_000
#: GPUs on one node.
MAX_GPUS_PER_NODE = 16
#: Streams on one GPU.
MAX_STREAMS_PER_GPU = 64
#: CPU cores on one node.
MAX_CPU_CORES = 1_024
#: Tasks in one workload (a run holds ~2 KB per task: rlsched.footprint).
MAX_TASKS = 1_000_000
#: Most task classes in one workload.
MAX_CLASSES = 16
#: Longest span of a scenario's arrivals, s (~32 years). Simulated times stay where float64
#: seconds keep microsecond resolution, and a rate typo (1e-13 tasks/min) is refused rather than
#: run for ever or divided by a kernel duration that rounded to 0.
MAX_HORIZON_S = 1e9
#: Most drift steps, or burst sojourns, over a scenario's arrivals (``interval_s = 1e-9`` would
#: step 10^12 times; the built-ins and generated cases take at most a few hundred, and 10^5 steps
#: of a small cluster's drift take ~2 s).
MAX_TIME_STEPS = 100_000
#: Largest drift sigma (std of the log-speed change per step): a factor of e^10 in one step is
#: beyond any drift, and exp overflows not far above.
MAX_DRIFT_SIGMA = 10.0
