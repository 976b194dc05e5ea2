#!/usr/bin/env bash
# The GPU checks of the live runtime, as one prepared run for a session lent the device machine
# (an H200 with CuPy, PyTorch and pytest in its image, no package registry). From the repo root:
#     run(command="bash experiments/benchmarks/gpu_check.sh", timeout_s=420)
# It runs the CuPy tests (kernels on CuPy vs NumPy, the CuPy backend, the agents on real GPUs) and
# the live benchmark on the cupy backend, and leaves the logs, plots and the profiler's CSVs under
# $OUT for BENCHMARKS.md. The image has no gymnasium or Ray: nothing here imports them.
set -o pipefail
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import cupy, numpy; print('cupy', cupy.__version__, 'numpy', numpy.__version__)" | tee -a "$OUT/gpu.txt"
# Plain pytest options: the image has pytest-timeout but none of our other dev tools.
timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider -o addopts="" -o timeout=120 \
    tests/test_runtime_kernels.py tests/test_runtime_backends.py tests/test_runtime_live.py 2>&1 | tee "$OUT/gpu_tests.txt"
RLSCHED_BACKEND=cupy timeout 240 python3 -m experiments.benchmarks.bench_live --backend cupy \
    --out "$OUT/bench" 2>&1 | tee "$OUT/bench_live.txt"
# The service on the CuPy backend: accept load, then the same 300 tasks through `rlsched serve`
# and through run_live (completed tasks/s of each), and the service's calibration of `ldwp+iawp`
# on real GPUs. It needs fastapi, uvicorn, prometheus_client and httpx in the image; where they
# are missing it says so and skips (carry them in a folder on PYTHONPATH to run it).
if python3 -c "import fastapi, uvicorn, prometheus_client, httpx" 2>/dev/null; then
    RLSCHED_BACKEND=cupy timeout 200 python3 -m experiments.benchmarks.bench_service --seconds 15 \
        --e2e-tasks 300 2>&1 | tee "$OUT/bench_service_cupy.txt"
    RLSCHED_TEST_BACKEND=cupy timeout 150 python3 -m pytest -q -p no:cacheprovider -o addopts="" \
        tests/test_service_learning.py -k calibrates 2>&1 | tee "$OUT/service_learning_cupy.txt"
else
    echo "service on CuPy skipped: fastapi, uvicorn, prometheus_client or httpx not in the image" \
        | tee "$OUT/bench_service_cupy.txt"
fi
