"""What ``rlsched evaluate`` keeps of each run as it finishes, and ``--resume``: an evaluation
that was interrupted (Ctrl-C, a killed process, a reboot), or one given more schedulers, seeds or
scenarios, runs only the runs its folder does not already hold.

Each finished run is a line of ``runs.jsonl`` (the case, its status and metrics, and ``run_key``)
and, for an ``ok`` run, ``run-details/KEY.npz``: its per-task latencies, completion times and GPU
busy samples, which the report's figures draw. ``KEY`` hashes the case (scenario, scheduler, seed,
rate, models, ...; not the time limit), the scenario file's bytes and :func:`fingerprint`: a
digest of the code the run depends on and the checksums of the model folders the evaluation
names. A run is kept only when its key is a case of the new evaluation; a folder holding
finished runs that are not (other settings, code or models, a scenario file since edited) is
refused rather than emptied: they may be results the user still wants. Failed, timed-out and
cut-short runs run again. The details are arrays read with ``allow_pickle=False``: a folder's
files are never unpickled.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import numpy as np

from experiments.configs import EvalConfig
from experiments.evaluation import Case, CaseResult
from rlsched.errors import InputError

#: Each finished run, one JSON line (kept if the evaluation is interrupted).
RUNS = "runs.jsonl"
#: The per-task arrays of each ``ok`` run, ``KEY.npz``.
DETAILS = "run-details"
_CASE_FIELDS = {f.name for f in fields(Case)}
_LINE_FIELDS = {"status", "error", "chose", "run_key"}


#: The code and files a run depends on besides its case: the simulator, the policies, the shipped
#: models and data, and the evaluation's run code (not the report's: a change there keeps every run).
CODE = ("rlsched", "envs", "models", "experiments/evaluation.py")
_ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def code_digest(root: Path = _ROOT) -> str:
    """sha256 of every file of :data:`CODE` under ``root`` (paths and bytes; no ``__pycache__``):
    installed from a wheel or checked out with edits alike, other code is another digest."""
    h = hashlib.sha256()
    for part in CODE:
        p = root / part
        inside = (f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
        files = [p] if p.is_file() else sorted(inside)
        for f in files:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def fingerprint(cfg: EvalConfig) -> str:
    """What besides the case decides a run: the code (:func:`code_digest`) and the model folders'
    ``meta.json`` (the checksums of their files).

    :param cfg: the evaluation.
    """
    parts = [code_digest()]
    for folder in (cfg.model, cfg.placer_model, cfg.recogniser):
        meta = Path(folder, "meta.json") if folder else None
        parts.append(meta.read_text(encoding="utf-8") if meta and meta.is_file() else "")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def run_key(case: Case, print_: str) -> str:
    """The key of one run: its case (but its time limit: a run that finished is the same run
    under any limit), its scenario file's bytes (an edited file is another scenario) and the
    evaluation's :func:`fingerprint`."""
    fields = asdict(case)
    fields.pop("timeout_s")
    text = json.dumps(fields, sort_keys=True) + print_ + _file_digest(case.scenario)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _file_digest(entry: str) -> str:
    """sha256 of the scenario file an entry names (``""`` for a built-in name)."""
    from experiments.case_folders import split_suffix

    path = Path(split_suffix(entry)[0]).expanduser()
    if not path.is_file():
        path = Path(entry).expanduser()  # a file whose own name holds a suffix character
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def held_runs(out: Path) -> int:
    """How many runs an earlier evaluation left in ``out`` (0: none, or no folder)."""
    path = out / RUNS
    if not path.is_file():
        return 0
    with path.open(encoding="utf-8") as f:
        return sum(1 for line in f if line.strip())


class RunLog:
    """``runs.jsonl`` and ``run-details/`` of one evaluation.

    :param out: the report's folder.
    :param print_: the evaluation's :func:`fingerprint`.
    """

    def __init__(self, out: Path, print_: str) -> None:
        self.out, self.print_ = out, print_
        self.path = out / RUNS
        self.details = out / DETAILS

    def kept(self, cases: Sequence[Case]) -> dict[Case, CaseResult]:
        """The ``ok`` runs of the folder that are cases of this evaluation, with their details.
        ``runs.jsonl`` is rewritten to hold just those (stale lines and detail files go), so
        what it says always matches the folder."""
        want = {run_key(c, self.print_): c for c in cases}
        kept: dict[Case, CaseResult] = {}
        lines: list[str] = []
        others = 0
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                got = self._result(line, want)
                if got is not None and got.case not in kept:
                    kept[got.case] = got
                    lines.append(line)
                elif _ok_key(line) not in (None, *want):
                    others += 1
        if others:  # results the user may still want: said and kept, never deleted in silence
            raise InputError(
                "--resume",
                "value",
                "a folder whose finished runs are all runs of this evaluation",
                str(self.out),
                hint=f"{others} of its runs ran other schedulers, scenarios, seeds or settings, other "
                "code or models, or a scenario file since edited, and resuming would delete them: give "
                f"another --out, or move {self.path} and {self.details} aside to start afresh",
            )
        self._rewrite(lines)
        keys = {run_key(c, self.print_) for c in kept}
        if self.details.is_dir():
            for f in self.details.glob("*.npz"):
                if f.stem not in keys:
                    f.unlink()
        return kept

    def start(self) -> None:
        """A new evaluation: no runs yet."""
        self._rewrite([])
        if self.details.is_dir():
            for f in self.details.glob("*.npz"):
                f.unlink()

    def keep(self, r: CaseResult) -> None:
        """Record one finished run: its details first, then its line (a line names only runs
        whose details are on disk)."""
        key = run_key(r.case, self.print_)
        if r.status == "ok":
            self._save_details(key, r)
        chose = {"chose": r.chose} if r.chose else {}
        line = {**asdict(r.case), "status": r.status, "error": r.error, **r.metrics, **chose, "run_key": key}
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def _result(self, line: str, want: dict[str, Case]) -> CaseResult | None:
        try:
            d = json.loads(line)
        except ValueError:  # a line cut short by the interruption
            return None
        case = want.get(d.get("run_key", "")) if isinstance(d, dict) else None
        if case is None or d.get("status") != "ok":
            return None
        arrays = self._load_details(d["run_key"])
        if arrays is None:
            return None
        metrics = {k: v for k, v in d.items() if k not in _CASE_FIELDS and k not in _LINE_FIELDS}
        return CaseResult(
            case, "ok", str(d.get("error", "")), metrics, chose=str(d.get("chose", "")), **arrays
        )

    def _save_details(self, key: str, r: CaseResult) -> None:
        self.details.mkdir(exist_ok=True)
        tmp = self.details / f"{key}.npz.tmp"
        with tmp.open("wb") as f:
            np.savez_compressed(
                f,
                latencies=np.asarray(r.latencies, dtype=np.float64),
                done_s=np.asarray(r.done_s, dtype=np.float64),
                util_t=np.asarray(r.util_t, dtype=np.float64),
                util=np.asarray(r.util, dtype=np.float64) if r.util else np.zeros((0, 0)),
                devices=np.asarray(r.devices, dtype=str),
            )
        os.replace(tmp, self.details / f"{key}.npz")

    def _load_details(self, key: str) -> dict[str, Any] | None:
        try:
            with np.load(self.details / f"{key}.npz", allow_pickle=False) as z:
                return {
                    "latencies": z["latencies"].tolist(),
                    "done_s": z["done_s"].tolist(),
                    "util_t": z["util_t"].tolist(),
                    "util": z["util"].tolist(),
                    "devices": [str(x) for x in z["devices"]],
                }
        except (OSError, ValueError, KeyError):  # missing or cut short: the run runs again
            return None

    def _rewrite(self, lines: list[str]) -> None:
        tmp = self.path.with_name(RUNS + ".tmp")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        os.replace(tmp, self.path)


def _ok_key(line: str) -> str | None:
    """The run key of a finished ``ok`` run's line (``None`` for a line cut short, a failed or
    timed-out run: those run again)."""
    try:
        d = json.loads(line)
    except ValueError:
        return None
    ok = isinstance(d, dict) and d.get("status") == "ok"
    return str(d.get("run_key")) if ok else None
