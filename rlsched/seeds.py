"""The three disjoint seed sets every experiment draws from.

A seed fixes one run of a scenario: its tasks, drift, and on trace scenarios the node sample and
the trace window. Learning uses the sets in the usual way:

* **training** seeds generate the episodes a policy learns from (behaviour cloning and DQN);
* **validation** seeds select among checkpoints (``best/``) and tune any constant;
* **test** seeds are the only ones any reported figure uses (``rlsched evaluate`` by default).

No seed is in two sets, so a figure on test seeds was never seen while a policy was trained or
chosen. Seeds outside all three (``>= 30000``) are allowed for ad-hoc runs and reported as such.
"""

from __future__ import annotations

#: Largest seed (numpy's 32-bit seed range): a scenario file's ``seed`` and every ``--seed`` flag.
MAX_SEED = 2**32 - 1

TRAINING = range(0, 10_000)
VALIDATION = range(10_000, 20_000)
TEST = range(20_000, 30_000)

#: Each named set's seeds, in the order a caption names them.
SETS = {"training": TRAINING, "validation": VALIDATION, "test": TEST}


#: Seeds of the default validation set (checkpoint selection in ``rlsched train``).
DEFAULT_VALIDATION: tuple[int, ...] = (10_001, 10_002, 10_003)


def seed_set(seed: int) -> str:
    """``"training"``, ``"validation"``, ``"test"`` or ``"other"``: the set ``seed`` belongs to."""
    for name, r in SETS.items():
        if seed in r:
            return name
    return "other"


def _sets(seeds: tuple[int, ...] | list[int]) -> list[str]:
    return sorted({seed_set(s) for s in seeds}, key=[*SETS, "other"].index)


def describe(seeds: tuple[int, ...] | list[int]) -> str:
    """Which sets a list of seeds comes from, for a figure's caption (e.g. ``"test"``)."""
    return " + ".join(_sets(seeds)) or "none"


def caption(seeds: tuple[int, ...] | list[int]) -> str:
    """Which sets a list of seeds comes from, with their ranges (e.g. ``"test set, seeds
    20000-29999, disjoint from the others"``; ``"test + other sets, seeds 20000-29999 and 30000
    up"`` for a mix).
    """
    names = _sets(seeds)
    spans = [
        f"{r.start}-{r.stop - 1}" if (r := SETS.get(n)) is not None else f"{TEST.stop} up" for n in names
    ]
    if names == ["other"]:
        return "other seeds"
    if len(names) == 1:
        return f"{names[0]} set, seeds {spans[0]}, disjoint from the others"
    return f"{describe(seeds)} sets, seeds " + " and ".join(spans)


def training_seed(run_seed: int, episode: int) -> int:
    """The seed of training episode ``episode`` of a run seeded ``run_seed`` (in :data:`TRAINING`).

    :param run_seed: the training run's seed (``TrainConfig.seed``).
    :param episode: episode index within the run.
    """
    return (run_seed * 1_000 + episode) % len(TRAINING)
