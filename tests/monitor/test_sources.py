"""Where a monitor looks: the registry's layout, as the golden documents name it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from merge import InputError
from merge.monitor import parse_listen
from merge.monitor.sources import RegistrySource, b32_of, mirror_urls, read_subjects_file

from ..conftest import GOLDEN_RECORD


def test_the_layout_is_the_one_the_golden_documents_name(golden_bundle: dict[str, Any]) -> None:
    registry = RegistrySource("https://pith.science")
    subject = golden_bundle["pith_number"]
    assert registry.bundle_url(subject) == golden_bundle["links"]["bundle"]
    record = json.loads(GOLDEN_RECORD.read_bytes())
    assert registry.record_url(record["pith_number"]) == record["links"]["json"]
    assert b32_of(subject) == golden_bundle["links"]["bundle"].split("/")[-2]


def test_mirror_urls_are_every_place_a_bundle_names_each_once(golden_bundle: dict[str, Any]) -> None:
    [hint] = golden_bundle["mirror_hints"]
    assert mirror_urls(golden_bundle) == [hint["bundle_url"], hint["well_known_bundle_url"]]
    odd = {
        "mirror_hints": [7, {"bundle_url": 1}],
        "links": {"bundle": "gopher://x/", "well_known_bundle": ""},
    }
    assert mirror_urls(odd) == ["gopher://x/"]  # reported by the round as of another scheme


def test_a_subjects_file() -> None:
    text = b"# followed\npith:2024:QKMXVEZKCSTCBURTJ6T7UZCPY6  # the example\n\n"
    assert read_subjects_file(text, "f") == ["pith:2024:QKMXVEZKCSTCBURTJ6T7UZCPY6"]
    with pytest.raises(InputError, match=r"f:2: 'nonsense' is not a pith number"):
        read_subjects_file(b"pith:2024:QKMXVEZKCSTCBURTJ6T7UZCPY6\nnonsense\n", "f")


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), ("[::1]:0", ("::1", 0)), ("localhost:80", ("localhost", 80))],
)
def test_listen_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_listen(text) == address


@pytest.mark.parametrize("text", ["9464", ":9464", "host:", "host:port", "host:70000"])
def test_bad_listen_addresses(text: str) -> None:
    with pytest.raises(InputError, match="HOST:PORT"):
        parse_listen(text)
