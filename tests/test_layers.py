"""The layering of ARCHITECTURE.md section 2, checked on every import statement of every package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"rlsched", "envs", "runtime", "models", "experiments"}
ALLOWED: dict[str, set[str]] = {
    "models": set(),
    "rlsched": {"models"},
    "envs": {"rlsched", "models"},
    "runtime": {"rlsched", "models"},
    "experiments": OURS - {"experiments"},
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    """Top-level packages of ours that a file imports, with line numbers."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in OURS:
                out.add((top, node.lineno))
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_lower_layers(package: str) -> None:
    bad = []
    for f in sorted((ROOT / package).rglob("*.py")):
        for top, line in imported_packages(f):
            if top != package and top not in ALLOWED[package]:
                bad.append(f"{f.relative_to(ROOT)}:{line} imports {top}")
    assert not bad, "imports that cross the layers of ARCHITECTURE.md section 2:\n" + "\n".join(bad)


def policy_imports(path: Path) -> list[tuple[str, int]]:
    """Modules under ``rlsched.policies`` a file imports other than the registry, with lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
            if node.module == "rlsched":
                names = [f"rlsched.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("rlsched.policies") and name not in (
                "rlsched.policies",
                "rlsched.policies.registry",
            ):
                out.append((name, node.lineno))
    return out


def test_policies_are_reached_only_through_the_registry() -> None:
    """The core, the simulated and the live world name policies through the registry only: no
    module outside ``rlsched/policies/`` imports a policy module."""
    bad = []
    for pkg in ("rlsched", "envs", "runtime"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            if f.is_relative_to(ROOT / "rlsched" / "policies"):
                continue
            bad += [f"{f.relative_to(ROOT)}:{line} imports {m}" for m, line in policy_imports(f)]
    assert not bad, "policy modules imported outside rlsched/policies:\n" + "\n".join(bad)


def test_policy_import_checker_sees_a_policy_module(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text(
        "from rlsched.policies.selectors import MctSelector\nfrom rlsched.policies import parse_scheduler\n"
        "from rlsched import policies\nimport rlsched.policies.iawp\n"
    )
    assert policy_imports(f) == [("rlsched.policies.selectors", 1), ("rlsched.policies.iawp", 4)]


def test_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("import os\nfrom runtime.backends import thing\nimport experiments.cli\n")
    assert imported_packages(f) == {("runtime", 2), ("experiments", 3)}


#: The files that may read the simulator's ground truth, each with why: the simulator and its
#: instruments (the world surveys with them; placers get the data only), and the clairvoyant
#: references, which declare themselves (``clairvoyant = True``) and which reports mark.
TRUTH_READERS: dict[str, str] = {
    "envs/simulator.py": "the simulator itself",
    "envs/sim_node.py": "the simulator's work on a node (a part of the simulator: rates from the truth)",
    "envs/oracle.py": "the oracle: a declared clairvoyant selector, a reference only",
    "envs/capacity.py": "the capacity bound: report-only, like the oracle",
    "envs/simulated_instrument.py": "the simulated co-location micro-benchmark (the world's instrument)",
    "envs/simulated_kind_profiles.py": "the simulated resource profiler (nsight/nvprof on a real machine)",
}
#: Classes outside ``envs/`` that may reach the simulator through attributes, by file: declared
#: clairvoyant references (checked to declare it), which the simulator binds and reports mark.
CLAIRVOYANT_CLASSES: dict[str, set[str]] = {
    "experiments/benchmarks/stage2_headroom.py": {"ClairvoyantPlacer", "TruePairsPlacer"},
}


def test_only_the_simulator_and_named_references_import_ground_truth() -> None:
    """Only the files of :data:`TRUTH_READERS` import the ground truth, in every package that may
    (``experiments`` included; policies in rlsched cannot import envs at all, which the layer test
    checks)."""
    readers = []
    for pkg in ("envs", "experiments", "runtime"):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text())):
                mods = []
                if isinstance(node, ast.ImportFrom):
                    mods = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    mods = [a.name for a in node.names]
                rel = f.relative_to(ROOT).as_posix()
                if any(m.endswith("ground_truth") for m in mods) and rel not in TRUTH_READERS:
                    readers.append(rel)
    assert not readers, f"modules other than the named truth readers import ground truth: {readers}"


#: Names through which an object handed to a policy could reach the simulator or its truth.
REACHING = {"truth", "_truth", "sim", "_sim", "simulator", "_co_run", "__closure__", "__globals__"}


def reaching_names(
    f: Path, allowed_classes: set[str] | frozenset[str] = frozenset()
) -> list[tuple[str, int]]:
    """Attribute accesses (and ``getattr`` strings) in a file that name the simulator or its truth,
    outside the bodies of ``allowed_classes``."""
    tree = ast.parse(f.read_text())
    exempt = {
        id(n)
        for c in ast.walk(tree)
        if isinstance(c, ast.ClassDef) and c.name in allowed_classes
        for n in ast.walk(c)
    }
    out = []
    for node in ast.walk(tree):
        if id(node) in exempt:
            continue
        if isinstance(node, ast.Attribute) and node.attr in REACHING:
            out.append((node.attr, node.lineno))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "vars")
            and any(isinstance(a, ast.Constant) and a.value in REACHING for a in node.args)
        ):
            out.append(("getattr", node.lineno))
    return out


@pytest.mark.parametrize("package", ["rlsched", "models", "experiments"])
def test_policies_never_reach_the_simulator_through_attributes(package: str) -> None:
    """Imports are not the only way in: code must not walk an object to the simulator or its
    ground truth either. ``experiments`` too, but for the declared clairvoyant references of
    :data:`CLAIRVOYANT_CLASSES` (what reaches by construction is ``tests/test_sealed.py``'s)."""
    bad = []
    for f in sorted((ROOT / package).rglob("*.py")):
        allowed = CLAIRVOYANT_CLASSES.get(f.relative_to(ROOT).as_posix(), set())
        bad += [f"{f.relative_to(ROOT)}:{line} .{name}" for name, line in reaching_names(f, allowed)]
    assert not bad, "code reaching for the simulator or its truth:\n" + "\n".join(bad)


def _targets(s: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return s.targets if isinstance(s, ast.Assign) else [s.target]


def test_named_clairvoyant_classes_declare_it() -> None:
    """Every exception of :data:`CLAIRVOYANT_CLASSES` exists and says ``clairvoyant = True``, so the
    simulator binds it only because it declares it, and reports mark its runs."""
    for rel, names in CLAIRVOYANT_CLASSES.items():
        classes = {
            c.name: c for c in ast.walk(ast.parse((ROOT / rel).read_text())) if isinstance(c, ast.ClassDef)
        }
        for name in names:
            assert name in classes, f"{rel}: no class {name}"
            declared = [
                s
                for s in classes[name].body
                if isinstance(s, ast.Assign | ast.AnnAssign)
                and any(isinstance(t, ast.Name) and t.id == "clairvoyant" for t in _targets(s))
                and isinstance(s.value, ast.Constant)
                and s.value.value is True
            ]
            assert declared, f"{rel}: {name} does not declare clairvoyant = True"


def test_reaching_checker_exempts_only_the_named_class(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text(
        "class Ref:\n    def g(self):\n        return self.sim.truth\n\ndef h(p):\n    return p.sim\n"
    )
    assert sorted(reaching_names(f, {"Ref"})) == [("sim", 6)]
    assert len(reaching_names(f)) == 3


def test_reaching_checker_sees_attribute_and_getattr(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    f.write_text("def f(p, env):\n    a = p.truth\n    b = getattr(env, 'sim')\n    return a, b\n")
    assert sorted(reaching_names(f)) == [("getattr", 3), ("truth", 2)]


def test_package_namespaces_expose_their_public_api_without_heavy_imports() -> None:
    """Each folder's ``__init__`` names its public API, every name resolves, and reading a name
    imports only its module (a fresh interpreter: the light names bring in neither torch nor ray)."""
    import subprocess
    import sys

    code = (
        "import sys, rlsched, runtime, envs, rlsched.scenarios as s, rlsched.interference as i, "
        "runtime.cluster as c, runtime.mlsm as m, rlsched.policies as p\n"
        "names = [rlsched.load_scenario, rlsched.World, runtime.LocalCluster, envs.Simulator, s.Scenario, "
        "i.read_colocation_csv, c.LiveSession, m.StreamPool, p.parse_scheduler]\n"
        "print('torch' in sys.modules, 'ray' in sys.modules)\n"
        "for pkg in (rlsched, runtime, envs, s, i, c, m, p):\n"
        "    assert all(hasattr(pkg, n) for n in pkg.__all__), pkg.__name__\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, known: set[str]) -> set[str]:
    """Modules of ours that ``path`` imports anywhere: at load time, inside functions and under
    ``TYPE_CHECKING`` alike (a lazy or type-only import still ties the two modules together)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in known:
            subs = {f"{node.module}.{a.name}" for a in node.names} & known
            # ``from pkg import mod`` is an import of the submodule; the package, which Python
            # initialises first, is only counted when a name of its own is taken from it.
            out.update(subs)
            if len(subs) < len(node.names):
                out.add(node.module)
    return out


def import_cycles() -> list[list[str]]:
    """Cycles among our modules' imports (each reported once, from its smallest name)."""
    files = {_module_name(f): f for top in sorted(OURS) for f in (ROOT / top).rglob("*.py")}
    graph = {m: module_imports(f, set(files)) - {m} for m, f in files.items()}
    cycles: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt == start:
                key = tuple(sorted(path))
                if key not in seen:
                    seen.add(key)
                    cycles.append([*path, start])
            elif nxt > start and nxt not in path and len(path) < 6:
                walk(start, nxt, [*path, nxt])

    for m in sorted(graph):
        walk(m, m, [m])
    return cycles


def test_no_module_imports_run_in_a_cycle() -> None:
    """Imports run one way: no cycle among our modules' imports, lazy and type-only ones included."""
    cycles = import_cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)
