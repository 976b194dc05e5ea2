"""``rlsched top``'s frame (experiments/commands/top_frames.py): drained nodes are named."""

from __future__ import annotations

from typing import Any

from experiments.commands.top_frames import frame


def _state(nodes: list[dict[str, Any]], waiting: list[str]) -> dict[str, Any]:
    gpu = {"model": "T4", "streams": 2, "running": 0, "mem_used_mib": 0.0, "mem_mib": 15360.0}
    return {
        "version": "1",
        "scheduler": "mct+mlsm",
        "backend": "local",
        "queued": 0,
        "running": 0,
        "done": 0,
        "nodes": [{**n, "gpus": [gpu]} for n in nodes],
        "drains_waiting": waiting,
    }


def test_drained_nodes_and_drains_that_wait_are_named_and_nothing_else() -> None:
    nodes = [
        {"name": "volta", "alive": True, "draining": True},
        {"name": "turing", "alive": True, "draining": False},
        {"name": "gone", "alive": False, "draining": True},
    ]
    lines = frame(_state(nodes, ["extra"]), 1.0, "http://x").splitlines()
    assert lines[-1] == "drained: volta; drained as they join: extra"
    lines = frame(_state(nodes[1:2], []), 1.0, "http://x").splitlines()
    assert not any(x.startswith("drained") for x in lines)
    assert frame(_state(nodes[1:2], ["extra"]), 1.0, "http://x").splitlines()[-1] == (
        "drained: none; drained as they join: extra"
    )


def test_every_line_fits_80_columns_for_a_plain_cluster() -> None:
    """The first line held the URL, the scheduler and the queue (about 100 columns): it wrapped."""
    nodes = [{"name": "volta", "alive": True, "draining": True}]
    state = _state(nodes, []) | {"version": "0.1.0", "scheduler": "ldwp+iawp-pass", "queued": 12345}
    lines = frame(state, 26.5, "http://127.0.0.1:8470").splitlines()
    assert max(len(x) for x in lines) <= 80, lines
    assert lines[1] == "12345 queued, 0 running, 0 done (26.5/s)"


def test_a_frame_is_cut_to_a_narrow_or_short_terminal() -> None:
    """At 60 columns each GPU line (69) wrapped and split its figures; at 8 rows the header
    scrolled away."""
    from experiments.commands.top_frames import fit

    nodes = [{"name": f"node{i}", "alive": True, "draining": False} for i in range(12)]
    text = frame(_state(nodes, []), 1.0, "http://127.0.0.1:8470")
    narrow = fit(text, 60, 40).splitlines()
    assert max(len(x) for x in narrow) == 60 and any(x.endswith("…") for x in narrow)
    short = fit(text, 100, 8).splitlines()
    assert len(short) == 7 and short[0] == text.splitlines()[0]
    assert short[-1] == f"… {len(text.splitlines()) - 6} more lines (a larger terminal shows them)"
    assert fit(text, 200, 100) == text  # what fits is left alone


def test_auto_shows_the_pair_it_runs_and_how_far_it_has_watched() -> None:
    """The header said `auto on numpy`: what placed tasks, and when auto would decide, nowhere."""
    nodes = [{"name": "volta", "alive": True, "draining": False}]
    auto = {"running": "ldwp+iawp", "tasks_seen": 12, "window": 50, "deciding": True}
    state = _state(nodes, []) | {"scheduler": "auto", "auto": auto}
    assert "auto (ldwp+iawp, deciding: 12/50 tasks) on local" in frame(state, 0.0, "http://x")
    state["auto"] = {**auto, "running": "mct-drain+iawp-pass", "deciding": False}
    assert "auto (mct-drain+iawp-pass) on local" in frame(state, 0.0, "http://x")


def test_a_gone_node_is_named_not_shown_and_a_cpu_only_node_is_shown() -> None:
    """A removed or lost node kept its GPU lines like a live one; a CPU-only node had none."""
    nodes = [
        {"name": "volta", "alive": False, "draining": False},
        {"name": "turing", "alive": True, "draining": False},
    ]
    state = _state(nodes, [])
    state["nodes"].append({"name": "ray-566503d9", "alive": True, "cpu_cores": 2, "gpus": []})
    lines = frame(state, 1.0, "http://x").splitlines()
    assert not any(x.startswith("volta ") for x in lines) and lines[-1] == "gone: volta"
    assert "ray-566503d9 -   cpu only (2 cores)" in lines
