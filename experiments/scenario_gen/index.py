"""The index of a generated scenario set, ``cases.json``: what each case is and which seed set it
belongs to, read back by whatever uses the set (training, model selection, ``rlsched evaluate``).

One case per scenario file of the folder: its file, family, case seed and seed set
(:mod:`rlsched.seeds`), whether its family is held out (test-only), the offered load aimed at and
the one reached on the case's own seed, and its regime (arrival-bound under
:data:`~experiments.report_stats.ARRIVAL_BOUND`, else has headroom). The index also keeps the
generator's version and the command line that wrote it. :func:`read_index` checks every field
and raises :class:`~rlsched.errors.InputError` naming the file and the field;
:func:`check_use` refuses cases that a purpose (training, validation) may not see.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rlsched.errors import InputError
from rlsched.seeds import seed_set

#: The index's file name inside a set's folder.
INDEX_NAME = "cases.json"
#: What the ``format`` key of an index holds.
FORMAT = "rlsched generated scenarios"
#: Version of the index's layout (not of the generator: ``generator_version`` says that).
FORMAT_VERSION = 1
#: The two regimes, as ``rlsched scenarios`` prints them.
REGIMES = ("arrival-bound", "has headroom")
#: The uses a set may be put to, and the seed sets each may draw from.
USES: dict[str, tuple[str, ...]] = {
    "training": ("training",),
    "validation": ("validation",),
    "test": ("test", "other"),
}


@dataclass(frozen=True)
class Case:
    """One generated scenario.

    :param file: the scenario file, relative to the index's folder.
    :param family: the family that generated it.
    :param seed: the case seed (generation and the scenario's own ``seed``).
    :param seed_set: ``training``, ``validation``, ``test`` or ``other`` (:func:`rlsched.seeds.seed_set`).
    :param test_only: its family is held out: training and validation never see it.
    :param target_load: offered load aimed at (arrival rate over the LP capacity bound).
    :param offered_load: offered load reached on the case's own seed.
    :param regime: ``arrival-bound`` (offered load under 0.8) or ``has headroom``.
    :param load_knob: the field that was scaled to set the load (e.g. ``workload.arrival.rate_per_min``).
    :param nodes: nodes in the cluster (all that ever join).
    :param tasks: tasks in the workload.
    """

    file: str
    family: str
    seed: int
    seed_set: str
    test_only: bool
    target_load: float
    offered_load: float
    regime: str
    load_knob: str
    nodes: int
    tasks: int


@dataclass(frozen=True)
class CaseIndex:
    """A set's index as read back.

    :param folder: the set's folder (where the index and the scenario files are).
    :param generator_version: version of the generator that wrote the set.
    :param command: the command line that wrote it.
    :param cases: its cases, in generation order.
    """

    folder: Path
    generator_version: int
    command: str
    cases: tuple[Case, ...]

    def path(self, case: Case) -> Path:
        """The scenario file of ``case``.

        :param case: one of :attr:`cases`.
        """
        return self.folder / case.file

    def paths(self) -> list[Path]:
        """Every case's scenario file, in order."""
        return [self.path(c) for c in self.cases]

    def in_set(self, name: str) -> tuple[Case, ...]:
        """The cases whose seed is in seed set ``name`` (``training``, ``validation``, ``test``, ``other``).

        :param name: the seed set.
        """
        return tuple(c for c in self.cases if c.seed_set == name)


def write_index(folder: Path, cases: Sequence[Case], generator_version: int, command: str) -> Path:
    """Write ``cases.json`` into ``folder``; returns its path.

    :param folder: the set's folder.
    :param cases: the cases, in generation order.
    :param generator_version: the generator's version.
    :param command: the command line that generated the set.
    """
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "generator_version": generator_version,
        "command": command,
        "cases": [asdict(c) for c in cases],
    }
    path = folder / INDEX_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def read_index(folder: str | Path) -> CaseIndex:
    """Read and check the index of a generated set.

    :param folder: the set's folder (or its ``cases.json``).
    :raises InputError: naming the index file and the field at fault (``cases[3].seed_set``):
        a missing or unparsable file, a wrong format, a case whose file is missing, whose seed set
        is not its seed's, or whose test-only family has a training or validation seed.
    """
    path = Path(folder).expanduser()
    if path.is_dir() or path.name != INDEX_NAME:
        path = path / INDEX_NAME
    src = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(
            src, "<file>", "the index of a set written by 'rlsched scenarios generate'"
        ) from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(src, "<file>", "a readable UTF-8 file", hint=str(e)) from None
    except ValueError as e:
        raise InputError(src, "<syntax>", "JSON", hint=str(e)) from None
    if not isinstance(doc, dict):
        raise InputError(src, "<file>", "a JSON object", type(doc).__name__)
    if doc.get("format") != FORMAT:
        raise InputError(src, "format", repr(FORMAT), doc.get("format"))
    version = doc.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT_VERSION:
        raise InputError(
            src, "format_version", f"1 to {FORMAT_VERSION}", version, hint="written by a newer rlsched?"
        )
    generator = _int(src, doc, "", "generator_version", 1)
    command = _str(src, doc, "", "command")
    raw = doc.get("cases")
    if not isinstance(raw, list) or not raw:
        raise InputError(src, "cases", "a non-empty list of cases", raw)
    cases = tuple(_case(src, path.parent, item, i) for i, item in enumerate(raw))
    _check_unique(src, cases)
    return CaseIndex(path.parent, generator, command, cases)


def check_use(index: CaseIndex, use: str, flag: str) -> None:
    """Refuse a set that ``use`` may not see: training draws only training seeds, validation only
    validation seeds, and neither any case of a test-only family.

    :param index: the set.
    :param use: ``training``, ``validation`` or ``test`` (:data:`USES`).
    :param flag: the flag that named the set (said in the message).
    :raises InputError: naming ``flag`` and the first case that breaks the rule.
    """
    allowed = USES[use]
    for c in index.cases:
        if c.test_only and use != "test":
            raise InputError(
                flag,
                "value",
                f"a set for {use} without test-only families",
                c.file,
                hint=f"family {c.family} is held out for testing",
            )
        if c.seed_set not in allowed:
            raise InputError(
                flag,
                "value",
                f"a set for {use} whose seeds are {' or '.join(allowed)} seeds",
                c.file,
                hint=f"its seed {c.seed} is a {c.seed_set} seed",
            )


# --- fields ------------------------------------------------------------------------------------


def _where(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _int(src: str, d: dict[str, Any], prefix: str, key: str, low: int) -> int:
    v = d.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v < low:
        raise InputError(src, _where(prefix, key), f"an integer >= {low}", v)
    return v


def _float(src: str, d: dict[str, Any], prefix: str, key: str) -> float:
    v = d.get(key)
    if not isinstance(v, int | float) or isinstance(v, bool) or not (math.isfinite(v) and v > 0):
        raise InputError(src, _where(prefix, key), "a finite number > 0", v)
    return float(v)


def _str(src: str, d: dict[str, Any], prefix: str, key: str, choices: Sequence[str] = ()) -> str:
    v = d.get(key)
    if not isinstance(v, str) or not v or (choices and v not in choices):
        expected = " or ".join(repr(c) for c in choices) if choices else "a non-empty string"
        raise InputError(src, _where(prefix, key), expected, v)
    return v


def _case(src: str, folder: Path, item: object, i: int) -> Case:
    at = f"cases[{i}]"
    if not isinstance(item, dict):
        raise InputError(src, at, "a JSON object", item)
    file = _str(src, item, at, "file")
    if Path(file).is_absolute() or ".." in Path(file).parts or not (folder / file).is_file():
        raise InputError(src, f"{at}.file", "a scenario file inside the index's folder", file)
    seed = _int(src, item, at, "seed", 0)
    named = _str(src, item, at, "seed_set", ("training", "validation", "test", "other"))
    if named != seed_set(seed):
        raise InputError(src, f"{at}.seed_set", f"{seed_set(seed)!r}, the set of seed {seed}", named)
    test_only = item.get("test_only")
    if not isinstance(test_only, bool):
        raise InputError(src, f"{at}.test_only", "true or false", test_only)
    case = Case(
        file=file,
        family=_str(src, item, at, "family"),
        seed=seed,
        seed_set=named,
        test_only=test_only,
        target_load=_float(src, item, at, "target_load"),
        offered_load=_float(src, item, at, "offered_load"),
        regime=_str(src, item, at, "regime", REGIMES),
        load_knob=_str(src, item, at, "load_knob"),
        nodes=_int(src, item, at, "nodes", 1),
        tasks=_int(src, item, at, "tasks", 1),
    )
    _check_case(src, at, case)
    return case


def _check_case(src: str, at: str, c: Case) -> None:
    """What ties a case's fields together: its regime, and its family's place among the sets."""
    from experiments.report_stats import ARRIVAL_BOUND
    from experiments.scenario_gen.families import FAMILIES

    regime = REGIMES[0] if c.offered_load < ARRIVAL_BOUND else REGIMES[1]
    if c.regime != regime:
        raise InputError(src, f"{at}.regime", f"{regime!r} at offered load {c.offered_load:g}", c.regime)
    family = FAMILIES.get(c.family)
    if family is not None and family.test_only != c.test_only:
        raise InputError(src, f"{at}.test_only", f"{family.test_only} for family {c.family}", c.test_only)
    if c.test_only and c.seed_set in ("training", "validation"):
        raise InputError(
            src, f"{at}.seed", f"a test seed for test-only family {c.family}", c.seed, hint="held out"
        )


def _check_unique(src: str, cases: Sequence[Case]) -> None:
    seen: dict[object, int] = {}
    for i, c in enumerate(cases):
        for key, value in (("file", c.file), ("seed", c.seed)):
            if (key, value) in seen:
                raise InputError(
                    src, f"cases[{i}].{key}", f"a {key} no other case has (cases[{seen[key, value]}])", value
                )
            seen[key, value] = i
