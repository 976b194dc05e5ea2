"""The report's table "By family": each learned pair against the best heuristic pair, one
generator family at a time, the held-out families last.

One figure over every case hides where a learned pair generalises: the families its networks and
recogniser were fitted on can carry it while the held-out ones fall behind (on the test cases of
2026-12-05, `auto` read 0.951–0.963 on the five shared families and 0.925 on `large` and `gavel`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from experiments.report_generalisation import CaseRatio, by_learned, geomean, throughput_summary
from experiments.report_writer import Block, _fmt

FAMILY_HEAD = ("learned pair", "family", "held out", "cases", "geo. mean", "min", "≥ 0.99×", "failed")
#: What the table says, above it.
FAMILY_TEXT = (
    "By family (from the cases' index): the throughput ratio's geometric mean and least value over "
    "each family's cases, and the share at or above 0.99× (a failed run counts against it). A "
    "held-out family is one training and validation never see: its row is the nearest a generated "
    "set comes to a kind of case the project was not built on."
)


def family_rows(ratios: Sequence[CaseRatio]) -> tuple[tuple[str, ...], ...]:
    """Per learned pair, per family (held-out families last, then by name): the table's rows.
    Cases without a family (no index) are left out."""
    rows = []
    for pair, mine in by_learned(ratios).items():
        families: dict[str, list[CaseRatio]] = defaultdict(list)
        for c in mine:
            if c.family:
                families[c.family].append(c)
        for family, cases in sorted(families.items(), key=lambda kv: (bool(kv[1][0].test_only), kv[0])):
            s = throughput_summary(cases)
            if not s.cases:
                continue
            share = s.share(at_least=0.99) or 0.0
            rows.append(
                (
                    pair,
                    family,
                    "yes" if cases[0].test_only else "no",
                    str(s.cases),
                    _fmt(geomean(s.ratios) if s.ratios else None),
                    _fmt(s.ratios[0] if s.ratios else None),
                    f"{100 * share:.0f} % ({round(share * s.cases)}/{s.cases})",
                    str(s.failed),
                )
            )
    return tuple(rows)


def family_blocks(ratios: Sequence[CaseRatio]) -> list[Block]:
    """The paragraph and table, or nothing where no case carries a family."""
    rows = family_rows(ratios)
    return [Block("p", FAMILY_TEXT), Block("table", head=FAMILY_HEAD, rows=rows)] if rows else []
