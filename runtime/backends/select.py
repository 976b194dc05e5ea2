"""Choose a device backend: CuPy where a CUDA device is usable, NumPy otherwise.

Detection is silent (no warnings, nothing printed) and cached: importing CuPy and asking the
driver for devices costs up to a second the first time, nothing after.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import warnings

from runtime.backends.base import BACKEND_ENV, Backend

#: Backend names in order of preference.
BACKENDS: tuple[str, ...] = ("cupy", "numpy")


@functools.cache
def cupy_unavailable_reason() -> str | None:
    """Why CuPy cannot be used here, or ``None`` when it can (result cached).

    :return: ``"not installed"``, ``"no CUDA device"`` or the error met while asking the driver.
    """
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed"
    try:
        # CuPy speaks through warnings (e.g. CUDA path not found); it does not print.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cupy = importlib.import_module("cupy")
            count = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as exc:  # any failure of a broken install or driver means "not usable"
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None if count > 0 else "no CUDA device"


def available_backends() -> list[str]:
    """Backends usable on this machine, in order of preference.

    :return: e.g. ``["cupy", "numpy"]`` on a GPU machine, ``["numpy"]`` elsewhere.
    """
    return [name for name in BACKENDS if name == "numpy" or cupy_unavailable_reason() is None]


def choose_backend(name: str | None = None, *, max_speed: float | None = None) -> Backend:
    """Open a backend by name, from ``$RLSCHED_BACKEND``, or the best one available.

    :param name: ``"numpy"`` or ``"cupy"``; ``None`` reads :data:`BACKEND_ENV`, and when that is
        unset or empty picks CuPy if a CUDA device is usable, else NumPy.
    :param max_speed: NumPy only: the emulated speed that runs at native speed (see
        :class:`~runtime.backends.numpy_backend.NumpyBackend`); real GPUs ignore it.
    :return: a new backend instance.
    :raises ValueError: an unknown name (the message lists the accepted values).
    :raises RuntimeError: ``cupy`` asked for where it cannot run (the message says why).
    """
    source = "backend name"
    if name is None:
        name = os.environ.get(BACKEND_ENV, "").strip() or None
        source = BACKEND_ENV
    if name is None:
        name = "cupy" if cupy_unavailable_reason() is None else "numpy"
    key = name.strip().lower()
    if key not in BACKENDS:
        accepted = ", ".join(repr(b) for b in BACKENDS)
        raise ValueError(f"{source} {name!r} is not a backend; accepted values: {accepted}")
    if key == "numpy":
        from runtime.backends.numpy_backend import NumpyBackend

        return NumpyBackend(max_speed)
    reason = cupy_unavailable_reason()
    if reason is not None:
        raise RuntimeError(f"the cupy backend cannot run here: {reason}")
    from runtime.backends.cupy_backend import CupyBackend

    return CupyBackend()
