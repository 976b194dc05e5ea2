"""A copied or unpickled ClusterView keeps its per-node arrays as columns of its ``dyn`` matrix."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable

import pytest

from experiments.evaluation import load_entry
from rlsched.view import DYN_COLUMNS, ClusterView

COPIES: dict[str, Callable[[ClusterView], ClusterView]] = {
    "deepcopy": copy.deepcopy,
    "pickle": lambda v: pickle.loads(pickle.dumps(v)),
}


@pytest.mark.parametrize("how", sorted(COPIES))
def test_updates_to_a_copy_reach_its_dense_matrix_and_not_the_original(how: str) -> None:
    view = ClusterView.from_spec(load_entry("transfer-4", None).cluster)
    view.cpu_started(1)
    twin = COPIES[how](view)
    col = DYN_COLUMNS.index("cpu_busy")
    twin.cpu_started(1)
    twin.cpu_started(1)
    assert twin.cpu_busy[1] == 3 and twin.dyn[1, col] == 3  # encoders read dyn
    assert view.cpu_busy[1] == 1 and view.dyn[1, col] == 1
    for j, name in enumerate(DYN_COLUMNS):
        assert getattr(twin, name).base is twin.dyn, name
        assert (getattr(twin, name) == twin.dyn[:, j]).all()
