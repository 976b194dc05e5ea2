"""The scenario entries a training run names (``--scenario``, ``--validation-scenario``), each
folder of generated cases checked against the seed and family rules. Light: ``rlsched train``
checks them before it imports torch and stable-baselines3."""

from __future__ import annotations

from pathlib import Path

from experiments.configs import TrainConfig


def scenario_entries(cfg: TrainConfig) -> list[str]:
    """The entries of ``cfg.scenario``, as written (the keys of per-scenario figures).

    :raises ValueError: naming ``scenario`` when it lists none.
    """
    return checked_entries(cfg.scenario, "scenario", "training")


def validation_entries(cfg: TrainConfig) -> list[str]:
    """The entries of the validation scenarios, as written (the keys of evaluation figures)."""
    if cfg.validation_scenario is None:
        return scenario_entries(cfg)
    return checked_entries(cfg.validation_scenario, "validation_scenario", "validation")


def checked_entries(text: str, field: str, use: str) -> list[str]:
    """The entries of ``text``, each folder of cases replaced by its scenario files. A folder of
    generated cases (``rlsched scenarios generate``), or one of its files, must hold only cases
    ``use`` may see: training seeds for training, validation seeds for validation, and no
    test-only family either way; no other file may carry a test seed."""
    from experiments.case_folders import check_file_use, expand_folders, split_suffix
    from experiments.scenario_gen.index import INDEX_NAME, check_use, read_index

    entries = [e.strip() for e in text.split(",") if e.strip()]
    if not entries:
        raise ValueError(f"{field}: expected one or more scenario entries, got {text!r}")
    flag = "--" + field.replace("_", "-")
    for e in entries:
        folder = Path(split_suffix(e)[0]).expanduser()
        if (folder / INDEX_NAME).is_file():
            check_use(read_index(folder), use, flag)
        else:
            check_file_use(e, use, flag)
    return expand_folders(entries, flag)
