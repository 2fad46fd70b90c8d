"""tlog-policy files: the grammar, every malformed case refused with its line, the quorum rule."""

from __future__ import annotations

import pytest

from merge import PolicyError
from merge.witness import parse_policy

from .keys import witness_key

A, B, C = (str(witness_key(name).vkey) for name in ("a.example/w", "b.example/w", "c.example/w"))
PLAIN = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"  # type 0x01 (C2SP)


def test_the_spec_s_two_level_example() -> None:
    text = f"""
    # X and Y are two organisations
    log {PLAIN}
    witness X1 {A} http://127.0.0.1:1
    witness X2 {B}
    group X-witnesses 2 X1 X2
    witness Y1 {C}
    group Y-witnesses any Y1
    group X-and-Y all X-witnesses Y-witnesses
    quorum X-and-Y
    """
    policy = parse_policy(text)
    assert [w.name for w in policy.witnesses] == ["X1", "X2", "Y1"]
    first = policy.witness("X1")
    assert first is not None
    assert first.url == "http://127.0.0.1:1"
    assert [(g.name, g.threshold) for g in policy.groups] == [
        ("X-witnesses", 2),
        ("Y-witnesses", 1),
        ("X-and-Y", 2),
    ]
    assert policy.satisfied({"X1", "X2", "Y1"})
    assert not policy.satisfied({"X1", "Y1"})  # X needs 2
    assert not policy.satisfied({"X1", "X2"})  # Y needs 1


def test_tabs_separate_and_quorum_none_asks_nothing() -> None:
    policy = parse_policy(f"witness\tw\t{A}\n\t quorum none  \n")
    assert policy.satisfied(set())


def test_a_single_witness_quorum() -> None:
    policy = parse_policy(f"witness w {A}\nquorum w\n")
    assert policy.satisfied({"w"})
    assert not policy.satisfied(set())


MALFORMED = [
    ("", None, "no quorum line"),
    (f"witness w {A}\n", None, "no quorum line"),
    (f"witness w {A}\nquorum w\nquorum w\n", 3, "second quorum"),
    ("quorum w\n", 1, "not defined"),
    (f"witness w {A}\ngroup g 1 w x\nquorum g\n", 2, "'x' is not defined"),
    (f"group g 1 w\nwitness w {A}\nquorum g\n", 1, "not defined on an earlier line"),
    (f"witness w {A}\nwitness w {B}\nquorum w\n", 2, "already defined"),
    (f"witness w {A}\nwitness v {A}\nquorum w\n", 2, "public key"),
    (f"witness none {A}\nquorum none\n", 1, "predefined"),
    (f"witness w {A}\ngroup g 1 none\nquorum g\n", 2, "no group member"),
    (f"witness w {A}\ngroup g 1 w w\nquorum g\n", 2, "twice"),
    (f"witness w {A}\ngroup g 0 w\nquorum g\n", 2, "threshold"),
    (f"witness w {A}\ngroup g 2 w\nquorum g\n", 2, "threshold"),
    (f"witness w {A}\ngroup g 01 w\nquorum g\n", 2, "threshold"),
    (f"witness w {A}\ngroup g some w\nquorum g\n", 2, "threshold"),
    (f"witness w {A}\ngroup g any\nquorum g\n", 2, "one member or more"),
    (f"witness w {PLAIN}\nquorum w\n", 1, "not 0x04"),
    (f"witness w {A[:-2]}\nquorum w\n", 1, "vkey"),
    (f"witness w {A} http://x extra\nquorum w\n", 1, "witness line"),
    ("witness w\nquorum w\n", 1, "witness line"),
    (f"log {PLAIN}\nlog {PLAIN}\nquorum none\n", 2, "public key"),
    (f"witness w {A}\nquorum w w\n", 2, "quorum line"),
    ("quorom none\n", 1, "unknown keyword"),
    (f"witness w {A}\x0bquorum w\n", 1, "control character 0x0b"),
    (f"witness w {A}\r\nquorum w\n", 1, "control character 0x0d"),
    # U+00A0 separates nothing (only space and tab do): the witness is "w\u00a0x", "w" is undefined.
    (f"witness w\u00a0x {A}\nquorum w\n", 2, "'w' is not defined"),
]


@pytest.mark.parametrize(("text", "line", "problem"), MALFORMED)
def test_every_malformed_policy_is_refused_with_its_line(text: str, line: int | None, problem: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policy(text)
    assert caught.value.line == line
    assert problem in caught.value.problem


def test_high_octets_are_opaque_names() -> None:
    policy = parse_policy(f"witness K {A}\nwitness \u212a {B}\ngroup g 2 K \u212a\nquorum g\n".encode())
    assert [w.name for w in policy.witnesses] == ["K", "\u212a"]
