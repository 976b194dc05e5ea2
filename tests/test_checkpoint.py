"""Checkpoints: checksums, feature versions, safe loading; the LDWP selector that reads them."""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from models.checkpoint import META, WEIGHTS, CheckpointError, load_checkpoint, save_checkpoint, write_meta
from models.qnet import NodeScorer
from rlsched.features import CLUSTER_FEATURES, FEATURE_VERSION, NODE_FEATURES, TASK_FEATURES


def meta(**kw: object) -> dict:
    base = {
        "feature_version": FEATURE_VERSION,
        "node_dim": len(NODE_FEATURES),
        "task_dim": len(TASK_FEATURES),
        "cluster_dim": len(CLUSTER_FEATURES),
        "net_arch": [8],
    }
    return {**base, **kw}


def scorer() -> NodeScorer:
    torch.manual_seed(0)
    return NodeScorer(len(NODE_FEATURES), len(TASK_FEATURES), len(CLUSTER_FEATURES), [8])


def test_round_trip_records_checksums(tmp_path: Path) -> None:
    net = scorer()
    save_checkpoint(tmp_path / "ck", net.state_dict(), meta(scenario="paper"))
    state, m = load_checkpoint(tmp_path / "ck", FEATURE_VERSION)
    assert m["scenario"] == "paper" and len(m["files"][WEIGHTS]) == 64
    for k, v in net.state_dict().items():
        assert torch.equal(state[k], v)


def test_modified_weights_are_refused(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, scorer().state_dict(), meta())
    with (tmp_path / WEIGHTS).open("ab") as f:
        f.write(b"\0")
    with pytest.raises(
        CheckpointError,
        match=r"weights.pt: sha256: expected the checksum meta.json records; the file is corrupt",
    ):
        load_checkpoint(tmp_path, FEATURE_VERSION)


def test_other_feature_version_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, scorer().state_dict(), meta(feature_version=FEATURE_VERSION + 1))
    with pytest.raises(
        CheckpointError,
        match=r"feature_version: expected \d+, the feature version this build encodes, got \d+; retrain",
    ):
        load_checkpoint(tmp_path, FEATURE_VERSION)


def test_missing_or_broken_metadata(tmp_path: Path) -> None:
    with pytest.raises(
        CheckpointError, match=r"meta.json: <file>: expected a checkpoint's meta.json; not found"
    ):
        load_checkpoint(tmp_path, FEATURE_VERSION)
    (tmp_path / META).write_text("{")
    with pytest.raises(CheckpointError, match=r"meta.json: <syntax>: expected valid JSON"):
        load_checkpoint(tmp_path, FEATURE_VERSION)
    (tmp_path / META).write_text(json.dumps({"feature_version": FEATURE_VERSION}))
    with pytest.raises(
        CheckpointError,
        match=r"meta.json: files: expected a table with the sha256 checksum of weights.pt, got None",
    ):
        load_checkpoint(tmp_path, FEATURE_VERSION)


def test_pickled_objects_are_not_loaded(tmp_path: Path) -> None:
    """weights_only=True: a checkpoint carrying an arbitrary object is refused even with a valid checksum."""

    class Evil:
        def __reduce__(self) -> tuple:
            return (print, ("unpickled!",))

    torch.save({"x": Evil()}, tmp_path / WEIGHTS)
    from models.checkpoint import sha256

    (tmp_path / META).write_text(json.dumps({**meta(), "files": {WEIGHTS: sha256(tmp_path / WEIGHTS)}}))
    with pytest.raises(
        CheckpointError, match=r"weights.pt: <file>: expected a weights file this build can read, got '"
    ):
        load_checkpoint(tmp_path, FEATURE_VERSION)
    # A bare pickle (not torch's format) made torch warn of its protocol before the refusal: the
    # refusal is the one line a user sees.
    with (tmp_path / WEIGHTS).open("wb") as f:
        pickle.dump({"x": Evil()}, f, protocol=4)
    (tmp_path / META).write_text(json.dumps({**meta(), "files": {WEIGHTS: sha256(tmp_path / WEIGHTS)}}))
    refused = pytest.raises(CheckpointError, match=r"<file>: expected a weights file")
    with refused, warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        load_checkpoint(tmp_path, FEATURE_VERSION)
    assert not said, [str(w.message)[:80] for w in said]


def _with_checksum(folder: Path, m: dict) -> None:
    from models.checkpoint import sha256

    (folder / META).write_text(json.dumps({**m, "files": {WEIGHTS: sha256(folder / WEIGHTS)}}))


def test_random_bytes_with_a_matching_checksum_are_a_checkpoint_error(tmp_path: Path) -> None:
    (tmp_path / WEIGHTS).write_bytes(np.random.default_rng(0).bytes(4096))
    _with_checksum(tmp_path, meta())
    with pytest.raises(CheckpointError, match="expected a weights file this build can read"):
        load_checkpoint(tmp_path, FEATURE_VERSION)


def test_an_edited_net_arch_is_a_checkpoint_error(tmp_path: Path) -> None:
    from rlsched.scorer_io import scorer_from_checkpoint

    save_checkpoint(tmp_path, scorer().state_dict(), meta())
    m = json.loads((tmp_path / META).read_text())
    for arch, fragment in (
        ([16], "expected weights that fit the network"),
        ("big", "net_arch: expected a list"),
    ):
        write_meta(tmp_path, {**m, "net_arch": arch})
        with pytest.raises(CheckpointError, match=fragment):
            scorer_from_checkpoint(tmp_path)


def test_an_edited_meta_json_is_refused_naming_its_seal(tmp_path: Path) -> None:
    """``meta.json`` says how the weights are built and fed: a value changed by hand (a feature
    version, one byte) is refused by the seal before anything reads it, by name; one written again
    with other indentation, or one of an older build (no seal), still loads."""
    from models.checkpoint import META_SHA256, read_verified_meta

    save_checkpoint(tmp_path, scorer().state_dict(), meta())
    text = (tmp_path / META).read_text()
    m = json.loads(text)
    assert len(m[META_SHA256]) == 64
    edited = text.replace(
        f'"feature_version": {FEATURE_VERSION}', f'"feature_version": {FEATURE_VERSION + 1}'
    )
    assert edited != text
    (tmp_path / META).write_text(edited)
    for read in (lambda: load_checkpoint(tmp_path, FEATURE_VERSION), lambda: read_verified_meta(tmp_path)):
        with pytest.raises(CheckpointError, match=r"meta.json: meta_sha256: expected the sha256 of the rest"):
            read()
    (tmp_path / META).write_text(json.dumps(m, indent=4))  # the same values, other layout
    assert load_checkpoint(tmp_path, FEATURE_VERSION)[1] == m
    (tmp_path / META).write_text(json.dumps({k: v for k, v in m.items() if k != META_SHA256}))
    assert META_SHA256 not in load_checkpoint(tmp_path, FEATURE_VERSION)[1]  # an older build's


def test_the_shipped_models_are_sealed() -> None:
    """Each shipped ``meta.json`` carries its seal, and it matches (re-sealed when re-saved)."""
    from models import PRETRAINED_IAWP_RL, PRETRAINED_LDWP, PRETRAINED_RECOGNISER
    from models.checkpoint import META_SHA256, meta_digest

    for d in (PRETRAINED_LDWP, PRETRAINED_IAWP_RL, PRETRAINED_RECOGNISER):
        m = json.loads((d / META).read_text())
        assert m.get(META_SHA256) == meta_digest(m), d


def test_the_version_error_names_the_command_that_makes_the_checkpoint(tmp_path: Path) -> None:
    save_checkpoint(tmp_path, scorer().state_dict(), meta(feature_version=-1))
    with pytest.raises(CheckpointError, match=r"retrain \(rlsched interference fit\)"):
        load_checkpoint(tmp_path, FEATURE_VERSION, retrain="rlsched interference fit")


def test_ldwp_selector_picks_the_best_feasible_node(tmp_path: Path, small_scenario) -> None:  # type: ignore[no-untyped-def]
    from envs.simulator import Simulator
    from rlsched.policies.ldwp import LdwpSelector, encode_batch
    from rlsched.policies.registry import make_placer
    from rlsched.scenarios.taskgen import generate_tasks
    from rlsched.scheduler import TwoStageScheduler

    net = scorer()
    save_checkpoint(tmp_path, net.state_dict(), meta())
    sel = LdwpSelector(tmp_path)
    sc = small_scenario(tasks=30)
    sim = Simulator(sc, generate_tasks(sc, 0), make_placer("speedup"), 0)
    task = sim.next_decision()
    assert task is not None
    mask = sim.mask(task)
    b = encode_batch(sim.view, task, mask)
    with torch.no_grad():
        q = net(b["nodes"], b["task"], b["cluster"], b["mask"])[0].numpy()
    assert sel.select(task, sim.view, mask) == int(np.argmax(np.where(mask, q, -np.inf)))
    placer = make_placer("speedup")
    m = Simulator(sc, generate_tasks(sc, 0), placer, 0).run(TwoStageScheduler(LdwpSelector(tmp_path), placer))
    assert m.tasks_lost == 0 and m.tasks_completed == 30
