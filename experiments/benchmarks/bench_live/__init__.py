"""The live runtime's figures, one module per section of ``python -m experiments.benchmarks.bench_live``
(see :mod:`experiments.benchmarks.bench_live.__main__` for the flags and the sections)."""
