"""The LDWP selector decides on one torch thread, whatever the process's pool is."""

from __future__ import annotations

import numpy as np
import torch

from rlsched.policies.ldwp import LdwpSelector
from rlsched.scenarios.taskgen import generate_tasks
from rlsched.view import ClusterView
from tests.test_feature_versions import CPU_QUEUES


def test_a_decision_runs_the_network_on_one_thread_and_restores_the_count() -> None:
    """A decision is one forward pass of a small network: torch's pool of one thread per core only
    adds synchronisation, and beside any other busy process (a second run, the host's own work)
    its threads wait on each other. Measured on the 2-core container with an evaluation running
    beside it: 81-1,206 decisions/s with the pool, 1,763-2,251 on one thread."""
    sel = LdwpSelector()
    seen: list[int] = []
    sel.net.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        v = ClusterView.from_spec(CPU_QUEUES.cluster)
        sel.select(generate_tasks(CPU_QUEUES, 0)[0], v, np.ones(v.n_nodes, dtype=bool))
        assert seen == [1]
        assert torch.get_num_threads() == 2  # the caller's count, back
    finally:
        torch.set_num_threads(before)
