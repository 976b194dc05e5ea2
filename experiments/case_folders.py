"""Folders of scenario files as ``--scenarios`` entries, and what their index says of each case.

A folder written by ``rlsched scenarios generate`` holds one scenario file per case and an index,
``cases.json`` (read by :func:`experiments.scenario_gen.index.read_index`), with each case's
family and seed set. A folder of plain scenario files, without the index, is a set of cases too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.scenario_gen.index import INDEX_NAME, check_use, read_index
from rlsched.errors import InputError
from rlsched.scenarios.loader import list_scenarios

#: Characters that start an entry's suffix (``@RATE``, ``~LOAD``, ``#TASKS``).
_SUFFIX_START = "@~#"


def split_suffix(entry: str) -> tuple[str, str]:
    """``entry`` as (path or name, suffix): ``"gen/#40"`` -> ``("gen/", "#40")``.

    The suffix starts at the first ``@``, ``~`` or ``#`` of the entry's last path component.

    :param entry: a ``NAME[@RATE|~LOAD][#TASKS]`` entry.
    """
    cut = max(entry.rfind("/"), entry.rfind("\\")) + 1
    tail = entry[cut:]
    starts = [i for i in (tail.find(c) for c in _SUFFIX_START) if i >= 0]
    if not starts:
        return entry, ""
    i = cut + min(starts)
    return entry[:i], entry[i:]


def _is_folder(name: str) -> bool:
    # A bare built-in name is the built-in (the loader's rule), even beside a folder of that name.
    bare = "/" not in name and "\\" not in name
    return Path(name).expanduser().is_dir() and not (bare and name in list_scenarios())


def expand_folders(entries: Sequence[str], flag: str = "--scenarios") -> list[str]:
    """``entries`` with each folder replaced by its scenario files, sorted by path: those its
    index lists where it has one (read and checked here, before any run), else its ``*.toml``.
    A suffix on the folder (``gen/#40``) goes on every file (``gen/a.toml#40``, ...).

    :param entries: ``--scenarios`` entries: built-in names, scenario files or folders.
    :param flag: the flag they came from, named in errors.
    :raises InputError: for a folder without scenario files, or with a bad index (naming it).
    """
    out: list[str] = []
    for entry in entries:
        name, suffix = split_suffix(entry)
        if not _is_folder(name):
            out.append(entry)
            continue
        folder = Path(name).expanduser()
        if (folder / INDEX_NAME).is_file():
            files = sorted(read_index(folder).paths())
        else:
            files = sorted(folder.glob("*.toml"))
        if not files:
            raise InputError(flag, entry, "a folder holding *.toml scenario files", name)
        out += [f"{f}{suffix}" for f in files]
    return out


@dataclass(frozen=True)
class CaseInfo:
    """What a generated folder's index says of one scenario file (``None``: not given).

    :param family: the generator family it was drawn from.
    :param seed_set: the seed set (:mod:`rlsched.seeds`) of its case seed.
    :param test_only: its family is held out: training and validation never see it.
    :param case_seed: the generator's seed of this case.
    :param offered_load: its offered load as generated (arrivals over the capacity bound).
    :param regime: ``arrival-bound`` or ``has headroom``.
    """

    family: str | None = None
    seed_set: str | None = None
    test_only: bool | None = None
    case_seed: int | None = None
    offered_load: float | None = None
    regime: str | None = None


def case_info(entries: Sequence[str]) -> dict[str, CaseInfo]:
    """What an index says of each scenario file, by entry: the index of the nearest folder above
    the file that lists it. Entries without one (built-ins, plain files) are left out, and so is
    an index that cannot be read (a report is not refused for it after its runs).

    :param entries: scenario entries, folders already expanded (:func:`expand_folders`).
    """
    out: dict[str, CaseInfo] = {}
    indexes: dict[Path, dict[Path, CaseInfo]] = {}
    for entry in entries:
        name, _ = split_suffix(entry)
        path = Path(name).expanduser()
        if not path.is_file():
            continue
        path = path.resolve()
        for folder in path.parents:
            if folder not in indexes:
                indexes[folder] = _read_index(folder)
            if path in indexes[folder]:
                out[entry] = indexes[folder][path]
                break
    return out


def _read_index(folder: Path) -> dict[Path, CaseInfo]:
    """The folder's index by resolved file path (empty without a readable one)."""
    if not (folder / INDEX_NAME).is_file():
        return {}
    try:
        index = read_index(folder)
    except InputError:
        return {}
    return {
        index.path(c).resolve(): CaseInfo(c.family, c.seed_set, c.test_only, c.seed, c.offered_load, c.regime)
        for c in index.cases
    }


def check_file_use(entry: str, use: str, flag: str) -> None:
    """Refuse one scenario file that ``use`` may not see (a folder is :func:`check_use`'s): a case
    of a generated set, by its index beside it, as :func:`check_use` would; any other file whose
    own ``seed`` is a test seed (a generated test case copied out of its set). Entries that are
    no file (built-ins, folders) pass.

    :param entry: a scenario entry as written (``FILE[@RATE|~LOAD][#TASKS]``).
    :param use: ``training``, ``validation`` or ``test``.
    :param flag: the flag that named it.
    :raises InputError: naming ``flag``, the file and its seed.
    """
    import dataclasses
    import tomllib

    from rlsched.seeds import seed_set

    path = Path(split_suffix(entry)[0]).expanduser()
    if use == "test" or not path.is_file():
        return
    if (path.parent / INDEX_NAME).is_file():
        index = read_index(path.parent)
        mine = tuple(c for c in index.cases if index.path(c).resolve() == path.resolve())
        if mine:
            check_use(dataclasses.replace(index, cases=mine), use, flag)
            return
    try:
        seed = tomllib.loads(path.read_text()).get("seed")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return  # not readable as a scenario: the scenario loader says why
    if isinstance(seed, int) and not isinstance(seed, bool) and seed_set(seed) == "test":
        raise InputError(
            flag,
            "value",
            f"a scenario for {use}, not a test case",
            str(path),
            hint=f"its seed {seed} is a test seed: test cases are for rlsched evaluate",
        )
