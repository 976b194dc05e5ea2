"""The report's "By family" table: each family's cases summarised on their own, held-out last."""

from __future__ import annotations

import pytest

from experiments.case_folders import CaseInfo
from experiments.report_by_family import family_blocks, family_rows
from experiments.report_generalisation import case_ratios
from tests.test_report_generalisation import result_row


def _rows() -> list[dict]:
    """Five cases: a and b of ``pods`` (0.9x and 1.0x), c of ``big`` (held out; 0.8x), d of ``big``
    where the learned run failed, e with no family."""
    out = []
    for case, mine in (("a", 0.9), ("b", 1.0), ("c", 0.8), ("d", None), ("e", 0.5)):
        out += [result_row(case, "ldwp+iawp", mine), result_row(case, "mct+speedup", 1.0)]
    return out


INFO = {
    "a": CaseInfo(family="pods", seed_set="test", test_only=False),
    "b": CaseInfo(family="pods", seed_set="test", test_only=False),
    "c": CaseInfo(family="big", seed_set="test", test_only=True),
    "d": CaseInfo(family="big", seed_set="test", test_only=True),
}


def test_each_family_is_summarised_on_its_own_cases_and_held_out_ones_come_last() -> None:
    rows = family_rows(case_ratios(_rows(), INFO))
    assert [r[:4] for r in rows] == [("ldwp+iawp", "pods", "no", "2"), ("ldwp+iawp", "big", "yes", "2")]
    pods, big = rows
    assert float(pods[4]) == pytest.approx((0.9 * 1.0) ** 0.5, abs=1e-3) and float(pods[5]) == pytest.approx(
        0.9
    )
    assert pods[6] == "50 % (1/2)" and pods[7] == "0"
    assert float(big[4]) == pytest.approx(0.8) and big[6] == "0 % (0/2)" and big[7] == "1"  # d failed


def test_no_family_no_table() -> None:
    assert family_blocks(case_ratios(_rows(), {})) == []
    assert [b.kind for b in family_blocks(case_ratios(_rows(), INFO))] == ["p", "table"]
