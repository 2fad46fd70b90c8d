"""merge.reasons: the reason codes and the words explain gives each."""

from __future__ import annotations

from merge.reasons import CHECK_ORDER, REASON_RULES, Reason


def test_every_reason_has_one_rule_text() -> None:
    assert set(REASON_RULES) == set(Reason)
    assert all(text.strip() for text in REASON_RULES.values())


def test_sections_follow_the_check_order() -> None:
    assert all(reason.section == "§6" for reason in CHECK_ORDER)
    assert {reason.section for reason in Reason if reason not in CHECK_ORDER} == {"§7"}
