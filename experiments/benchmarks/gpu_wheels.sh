#!/usr/bin/env bash
# Fetch, into the ignored folder .whl, the wheels that gpu_check.sh needs and the device machine's
# image lacks (its Python is 3.12 on x86-64; it has CuPy, torch, numpy, pytest, httpx and
# prometheus_client, but not the service's web stack nor gymnasium). Run here, from the repo root,
# with the project's venv; then run gpu_check.sh with carry=[".whl"]. Versions are this venv's.
set -euo pipefail
PY=${PY:-.venv/bin/python}
pkgs=(fastapi starlette pydantic pydantic_core annotated-types typing-inspection typing_extensions
    opentelemetry-api uvicorn gymnasium Farama-Notifications stable_baselines3)
pins=()
for p in "${pkgs[@]}"; do
    v=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$p")
    pins+=("$p==$v")
done
rm -rf .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .whl "${pins[@]}"
ls .whl
