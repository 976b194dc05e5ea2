"""The README's status paragraph names only what exists: its commands, policies and scenarios."""

from __future__ import annotations

import re
from pathlib import Path

from experiments.commands import COMMANDS
from rlsched.policies.registry import AUTO, PLACERS, SELECTORS, parse_scheduler
from rlsched.scenarios.loader import list_scenarios

README = Path(__file__).resolve().parents[1] / "README.md"


def status_paragraph(text: str) -> str:
    """The paragraph that starts with ``**Status.**``."""
    start = text.index("**Status.**")
    return text[start : text.index("\n\n", start)]


def unknown_names(paragraph: str) -> list[str]:
    """Backquoted names in ``paragraph`` that are no command, policy, scheduler or scenario."""
    commands = {c.name for c in COMMANDS}
    scenarios = set(list_scenarios())
    bad = []
    for name in re.findall(r"`([^`]+)`", paragraph):
        words = name.split()
        if words[0] == "rlsched":
            if len(words) < 2 or words[1] not in commands:
                bad.append(name)
        elif "+" in name or name == AUTO:
            try:
                parse_scheduler(name)
            except (KeyError, ValueError):
                bad.append(name)
        elif name not in PLACERS and name not in SELECTORS and name not in scenarios and name != "...":
            bad.append(name)
    return bad


def test_the_status_paragraph_names_only_what_exists() -> None:
    paragraph = status_paragraph(README.read_text(encoding="utf-8"))
    assert "rlsched serve" in paragraph and "iawp-rl" in paragraph
    assert unknown_names(paragraph) == []


def test_the_check_catches_a_name_that_does_not_exist() -> None:
    assert unknown_names("**Status.** `rlsched serve`, `rlsched teleport`, `iawp-magic`, `mct+nope`") == [
        "rlsched teleport",
        "iawp-magic",
        "mct+nope",
    ]
