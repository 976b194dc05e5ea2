"""Hardware catalog: public specifications of GPU models and the CPU of a worker node.

Figures are vendor datasheet numbers (boost clocks, FP32 without sparsity). They are the
*public* description a real scheduler can know; how fast a given kernel really runs on a
model is ground truth and lives in ``envs.ground_truth`` only.
"""

from __future__ import annotations

from dataclasses import dataclass

#: PCIe x16 unidirectional bandwidth in GB/s per generation.
PCIE_GBS: dict[int, float] = {3: 15.75, 4: 31.5, 5: 63.0}


@dataclass(frozen=True)
class GpuModel:
    """Public specification of one GPU model.

    :param name: catalog key, e.g. ``"V100M16"``.
    :param fp32_tflops: peak FP32 throughput in TFLOP/s.
    :param mem_gib: device memory in GiB.
    :param mem_bw_gbs: device memory bandwidth in GB/s.
    :param pcie_gen: host link PCIe generation.
    :param arch: micro-architecture (Kepler, Pascal, Volta, Turing, Ampere, Ada, Hopper).
    :param note: assumptions behind the figures, where any were needed.
    """

    name: str
    fp32_tflops: float
    mem_gib: float
    mem_bw_gbs: float
    pcie_gen: int
    arch: str
    note: str = ""

    @property
    def pcie_gbs(self) -> float:
        """Host-to-device bandwidth of an x16 link of this generation, GB/s."""
        return PCIE_GBS[self.pcie_gen]


def _m(name: str, tflops: float, mem: float, bw: float, pcie: int, arch: str, note: str = "") -> GpuModel:
    return GpuModel(name, tflops, mem, bw, pcie, arch, note)


CATALOG: dict[str, GpuModel] = {
    g.name: g
    for g in (
        _m("P4", 5.5, 8, 192, 3, "Pascal"),
        _m(
            "K80",
            8.73,
            24,
            480,
            3,
            "Kepler",
            "board figures: two GK210 dies (4.37 TFLOP/s, 12 GiB, 240 GB/s each) treated as one "
            "device, as the TPDS paper counts a K80 as one 24 GB GPU",
        ),
        _m("P100", 9.3, 16, 732, 3, "Pascal", "PCIe 16 GB variant"),
        _m("T4", 8.1, 16, 320, 3, "Turing"),
        _m("V100M16", 15.7, 16, 900, 3, "Volta", "SXM2; host link PCIe 3.0"),
        _m("V100M32", 15.7, 32, 900, 3, "Volta", "SXM2; host link PCIe 3.0"),
        _m("A10", 31.2, 24, 600, 4, "Ampere"),
        _m("A100", 19.5, 40, 1555, 4, "Ampere", "SXM4 40 GB"),
        _m("A100-80", 19.5, 80, 2039, 4, "Ampere", "SXM4 80 GB"),
        _m("L4", 30.3, 24, 300, 4, "Ada"),
        _m("H100", 67.0, 80, 3350, 5, "Hopper", "SXM5 80 GB"),
        _m("H200", 67.0, 141, 4800, 5, "Hopper", "SXM 141 GB"),
        _m(
            "G2",
            8.1,
            16,
            320,
            3,
            "Turing",
            "undisclosed Alibaba code; ASSUMED T4-class (549 eight-GPU nodes with 96 cores and "
            "384 GiB host memory in the v2023 trace suggest an inference fleet)",
        ),
        _m(
            "G3",
            31.2,
            24,
            600,
            4,
            "Ampere",
            "undisclosed Alibaba code; ASSUMED A10-class (39 eight-GPU nodes with 128 cores and "
            "768 GiB host memory, the newest hosts in the v2023 trace)",
        ),
    )
}

#: Aliases users may write in scenario files.
ALIASES: dict[str, str] = {"V100": "V100M16", "V100-16": "V100M16", "V100-32": "V100M32", "A100-40": "A100"}


def model_names() -> str:
    """The catalog's GPU model names, then the aliases, for a message that refuses one."""
    return ", ".join([*CATALOG, *ALIASES])


def gpu_model(name: str) -> GpuModel:
    """Look up a GPU model by catalog name or alias.

    :param name: e.g. ``"T4"``, ``"V100"``, ``"V100M32"``.
    :raises KeyError: with the known names when ``name`` is not in the catalog.
    """
    key = ALIASES.get(name, name)
    try:
        return CATALOG[key]
    except KeyError:
        raise KeyError(f"unknown GPU model {name!r}; known: {model_names()}") from None


#: Sustained per-core FP32 GFLOP/s of the reference worker CPU (Xeon E5-2620 v3, Haswell:
#: 2.4 GHz x 16 FP32 FLOP/cycle with AVX2 FMA = 38.4 peak; realistic vectorised code ~25).
CPU_CORE_GFLOPS = 25.0
#: Host memory bandwidth per socket of the reference CPU, GB/s (4 x DDR4-1866).
CPU_SOCKET_BW_GBS = 59.0


def device_models(device: str) -> set[str]:
    """Catalog models a measurement CSV's device name covers.

    Case-insensitive; an exact catalog name covers itself, and a prefix not followed by a digit
    covers its variants: ``v100`` -> ``{V100M16, V100M32}``, ``a100`` -> ``{A100, A100-80}``,
    ``a10`` -> ``{A10}``.

    :param device: device name as written in a measurement CSV.
    """
    d = device.strip().upper()
    out = set()
    for name in CATALOG:
        u = name.upper()
        if u == d or (d and u.startswith(d) and not u[len(d)].isdigit()):
            out.add(name)
    alias = ALIASES.get(device.strip())
    if alias:
        out.add(alias)
    return out
