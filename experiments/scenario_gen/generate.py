"""Writing a generated set: which family and seed each case gets, the seed and family rules, the
scenario files (through :func:`rlsched.scenarios.writer.dump_scenario`) and the index.

Case ``i`` of a set generated from ``--seed S`` has case seed ``S + i``; the whole set lies in one
seed set of :mod:`rlsched.seeds` (training, validation, test, or the ad-hoc seeds past them), so a
set is training, validation or test data, never a mix. Families in
:data:`~experiments.scenario_gen.families.TEST_ONLY` are generated only on test (or ad-hoc) seeds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from rlsched.errors import InputError
from rlsched.scenarios.data_paths import DATA_ENV, find_data_dir
from rlsched.scenarios.loader import load_scenario
from rlsched.scenarios.spec import Scenario
from rlsched.scenarios.writer import dump_scenario
from rlsched.seeds import MAX_SEED, TEST, TRAINING, VALIDATION, seed_set

from .families import DATA_DIR, FAMILIES, Family
from .index import INDEX_NAME, REGIMES, Case, CaseIndex, read_index, write_index
from .load import LOAD_RANGE, set_load
from .size import sized

#: Version of the generator: bumped whenever the same command would write other cases.
GENERATOR_VERSION = 1
#: Seed sets held-out families may not draw from.
_NOT_FOR_TEST_ONLY = ("training", "validation")
#: Salt of the random source a case is drawn from (distinct from the streams the case seed
#: itself drives in a run: tasks, drift, trace windows).
_SALT = 0x5CE2A7
_SPANS = {"training": TRAINING, "validation": VALIDATION, "test": TEST}


def span_text(name: str) -> str:
    """The seeds of a seed set, as ``20000-29999`` (``30000 and up`` for ad-hoc seeds)."""
    r = _SPANS.get(name)
    return f"{r.start}-{r.stop - 1}" if r else f"{TEST.stop} and up"


def plan(count: int, seed: int, family: str | None) -> list[tuple[int, Family]]:
    """(case seed, family) of each case: ``family``, or every family the seed set allows in turn.

    :param count: cases (``--count``).
    :param seed: the first case seed (``--seed``).
    :param family: one family (``--family``), or ``None`` for all.
    :raises InputError: naming ``--family`` for an unknown family or a test-only one on training or
        validation seeds, ``--seed`` for seeds that cross a seed set's boundary.
    """
    last = seed + count - 1
    first_set, last_set = seed_set(seed), seed_set(last)
    if last > MAX_SEED:
        raise InputError(
            "--seed",
            "value",
            f"a first seed whose {count} case seeds stay at most {MAX_SEED:,} (numpy's seed range)",
            seed,
            hint=f"case seeds run from --seed to --seed + --count - 1 = {last:,}",
        )
    if first_set != last_set:
        where = f"{first_set} seeds {span_text(first_set)}"
        raise InputError(
            "--seed",
            "value",
            f"a first seed whose {count} case seeds stay among the {where}",
            seed,
            hint=f"case seeds run from --seed to --seed + --count - 1 = {last}, a seed of the {last_set} set",
        )
    if family is not None and family not in FAMILIES:
        raise InputError("--family", "value", f"a family ({', '.join(FAMILIES)})", family)
    if family is not None and FAMILIES[family].test_only and first_set in _NOT_FOR_TEST_ONLY:
        raise InputError(
            "--family",
            "value",
            f"a family that is not test-only, with --seed in the {first_set} set",
            family,
            hint=f"{family} is held out for testing: give it test seeds (--seed {span_text('test')})",
        )
    if family is not None:
        chosen = [FAMILIES[family]]
    else:
        held_out = first_set in _NOT_FOR_TEST_ONLY
        chosen = [f for f in FAMILIES.values() if not (held_out and f.test_only)]
    return [(seed + i, chosen[i % len(chosen)]) for i in range(count)]


def case_rng(seed: int, stream: int) -> np.random.Generator:
    """The random source of one case: ``stream`` 0 draws the scenario, 1 its target load, 2 its
    run length.

    :param seed: the case seed.
    :param stream: which stream.
    """
    return np.random.default_rng(np.random.SeedSequence([_SALT, seed, stream]))


def check_out(out: Path) -> None:
    """Refuse a folder that already holds a set (its index or scenario files would mix with the
    new), or files where the cases write their data (they would be overwritten, or removed with
    an interrupted set).

    :param out: ``--out``.
    :raises InputError: naming ``--out``.
    """
    if (out / INDEX_NAME).exists():
        raise InputError(
            "--out", "value", "a new or empty folder", str(out), hint="it already holds a set; choose another"
        )
    if any(out.glob("*.toml")):  # a generation killed mid-set (kill -9, a crash) leaves its cases
        raise InputError(
            "--out",
            "value",
            "a new or empty folder",
            str(out),
            hint=f"it holds scenario files but no {INDEX_NAME}: an unfinished set? "
            "remove them, or choose another",
        )
    data = out / DATA_DIR
    if data.is_dir() and any(data.iterdir()):  # cases write their data there: nothing overwritten
        raise InputError(
            "--out",
            "value",
            "a new or empty folder",
            str(out),
            hint=f"its {DATA_DIR}/ folder holds files, where a set's cases write theirs; choose another",
        )


def generate_set(
    out: Path,
    count: int,
    seed: int,
    family: str | None,
    command: str,
    on_case: Callable[[Case], None] | None = None,
) -> CaseIndex:
    """Generate ``count`` cases into ``out`` and write their index; returns it as read back.

    :param out: the set's folder (created if missing).
    :param count: cases.
    :param seed: the first case seed.
    :param family: one family, or ``None`` for all in turn.
    :param command: the command line (kept in the index).
    :param on_case: called after each case is written (a progress bar).
    :raises InputError: see :func:`plan` and :func:`check_out`.
    """
    cases_plan = plan(count, seed, family)
    out.mkdir(parents=True, exist_ok=True)
    check_out(out)
    cases: list[Case] = []
    written: list[Path] = []
    try:
        for case_seed, fam in cases_plan:
            case = write_case(out, fam, case_seed, written)
            cases.append(case)
            if on_case is not None:
                on_case(case)
        written.append((out / INDEX_NAME).with_suffix(".json.tmp"))
        write_index(out, cases, GENERATOR_VERSION, command)
    except BaseException:  # Ctrl-C or an error: no half set that the next run would refuse
        _remove(written, out)
        raise
    return read_index(out)


def _remove(written: list[Path], out: Path) -> None:
    """Remove the files a generation wrote into ``out``, and the folders it left empty."""
    for path in reversed(written):
        path.unlink(missing_ok=True)
        for parent in path.parents:
            if parent == out or not parent.is_relative_to(out):
                break
            try:
                parent.rmdir()  # only when empty: another case's data stays until its turn
            except OSError:
                break


def write_case(out: Path, family: Family, seed: int, written: list[Path] | None = None) -> Case:
    """Draw one case of ``family``, write its data and scenario files into ``out`` at a target
    load, and return its index entry.

    :param out: the set's folder.
    :param family: the family.
    :param seed: the case seed.
    :param written: each file is appended here before it is written (to remove them if the set
        is not finished).
    """
    written = [] if written is None else written
    draft = family.make(case_rng(seed, 0), seed)
    for rel, text in draft.data.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        written.append(path)
        path.write_text(text, encoding="utf-8")
    target = round(float(case_rng(seed, 1).uniform(*LOAD_RANGE)), 3)
    file = out / f"{draft.scenario.name}.toml"
    written.append(file)

    def write(sc: Scenario) -> Scenario:
        file.write_text(portable(dump_scenario(sc)), encoding="utf-8")
        return load_scenario(str(file))

    sc = draft.scenario
    if draft.tasks is not None:
        sc = sized(case_rng(seed, 2), sc, draft.tasks, write)
    result = set_load(sc, target, write)
    return Case(
        file=file.name,
        family=family.name,
        seed=seed,
        seed_set=seed_set(seed),
        test_only=family.test_only,
        target_load=target,
        offered_load=result.offered_load,
        regime=REGIMES[0] if result.arrival_bound else REGIMES[1],
        load_knob=result.knob,
        nodes=len(result.loaded.cluster.nodes),
        tasks=result.loaded.workload.tasks,
    )


def portable(text: str) -> str:
    """Scenario-file text whose shipped data paths read ``${RLSCHED_DATA}/...`` (the writer writes
    paths as loaded, absolute), so that a set moves with the repository or an install.

    :param text: what :func:`~rlsched.scenarios.writer.dump_scenario` wrote.
    """
    quoted = re.escape('"' + str(find_data_dir()))
    return re.sub(quoted + r"(?=/)", '"${' + DATA_ENV + "}", text)
