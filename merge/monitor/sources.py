"""Where a monitor looks: directories of bundles and URLs laid out as the registry is.

The registry's own documents say where a subject's documents are (the golden bundle's ``links``
and ``mirror_hints``, the golden record's ``links.json``): ``<base>/pith/<B32>/bundle.json`` for
the bundle, ``<base>/pith/<B32>.json`` for the record, ``<B32>`` being the 26 letters of the
pith number. A monitor's ``--listen`` endpoint serves the same layout, so it is a source, a
mirror and a peer for others.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import msgspec

from ..errors import InputError

__all__ = [
    "DirectorySource",
    "RegistrySource",
    "Source",
    "b32_of",
    "mirror_urls",
    "parse_source",
    "parse_subject",
    "read_subjects_file",
    "web_url_problem",
]

#: A pith number (§2): ``pith:YYYY:`` and the 26 base-32 letters that name it in URLs.
PITH_NUMBER: Final = re.compile(r"pith:[0-9]{4}:([A-Z2-7]{26})")
#: The only schemes a monitor ever reads from the network.
WEB_SCHEMES: Final = frozenset({"http", "https"})


def b32_of(subject: str) -> str | None:
    """The 26 letters of a pith number, as the registry's URLs name it; None for anything else."""
    match = PITH_NUMBER.fullmatch(subject)
    return match[1] if match else None


def parse_subject(text: str, *, source: str | None = None) -> str:
    """A subject to follow: a pith number, else :class:`merge.InputError`."""
    subject = text.strip()
    if b32_of(subject) is None:
        raise InputError(f"{subject!r} is not a pith number (pith:YYYY:<26 letters A-Z, 2-7>)", source=source)
    return subject


def read_subjects_file(data: bytes, source: str) -> list[str]:
    """The subjects of a ``--subjects`` file: one pith number a line (blank lines and ``#``
    comments skipped)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text: {exc}", source=source) from None
    subjects = []
    for number, line in enumerate(text.splitlines(), 1):
        if subject := line.split("#", 1)[0].strip():
            subjects.append(parse_subject(subject, source=f"{source}:{number}"))
    return subjects


def web_url_problem(url: str) -> str | None:
    """Why ``url`` is not one a monitor reads (not http(s), no host), or None when it is."""
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (read for its check: a port that is no number or out of range)
    except ValueError as exc:
        return f"not a URL: {exc}"
    if parts.scheme.lower() not in WEB_SCHEMES:
        return f"scheme {parts.scheme + ':' if parts.scheme else 'missing'}: only http and https are read"
    if not parts.hostname:
        return "no host"
    return None


class DirectorySource(msgspec.Struct, frozen=True):
    """A directory some fetcher fills: every ``*.json`` document under it (bundles, records)."""

    path: Path

    @property
    def label(self) -> str:
        """How reports name it."""
        return str(self.path)


class RegistrySource(msgspec.Struct, frozen=True):
    """A base URL laid out as the registry is (a registry, a mirror, a monitor's ``--listen``)."""

    base: str

    @property
    def label(self) -> str:
        """How reports name it."""
        return self.base

    def bundle_url(self, subject: str) -> str:
        """``<base>/pith/<B32>/bundle.json``: where the subject's bundle is."""
        return f"{self.base}/pith/{_letters(subject)}/bundle.json"

    def record_url(self, subject: str) -> str:
        """``<base>/pith/<B32>.json``: where the subject's pith number record is."""
        return f"{self.base}/pith/{_letters(subject)}.json"


#: A place a monitor reads: a directory some fetcher fills, or a registry's base URL.
Source = DirectorySource | RegistrySource


def _letters(subject: str) -> str:
    letters = b32_of(subject)
    if letters is None:
        raise InputError(f"{subject!r} is not a pith number: it has no place in the registry's layout")
    return letters


def parse_source(text: str) -> Source:
    """A ``SOURCE`` argument: an http(s) base URL, or an existing directory (else InputError)."""
    if "://" in text:
        problem = web_url_problem(text)
        if problem is not None:
            raise InputError(problem, source=text)
        return RegistrySource(text.rstrip("/"))
    path = Path(text)
    try:
        is_dir = path.is_dir()
    except (OSError, ValueError):  # a path the system refuses to look at (too long, a NUL)
        is_dir = False
    if not is_dir:
        raise InputError("a source is an http(s) URL or a directory of bundles", source=text)
    return DirectorySource(path)


def mirror_urls(bundle: Mapping[str, Any]) -> list[str]:
    """Every place a bundle names for its own copies, in order, each once.

    ``mirror_hints[].bundle_url`` and ``…well_known_bundle_url``, then ``links.bundle`` and
    ``links.well_known_bundle`` (the golden bundle's fields). Values that are not strings are
    passed over; URLs of other schemes are returned too, so that the caller can report them.
    """
    found: list[Any] = []
    hints = bundle.get("mirror_hints")
    for hint in hints if isinstance(hints, list) else ():
        if isinstance(hint, Mapping):
            found += [hint.get("bundle_url"), hint.get("well_known_bundle_url")]
    links = bundle.get("links")
    if isinstance(links, Mapping):
        found += [links.get("bundle"), links.get("well_known_bundle")]
    return list(dict.fromkeys(url for url in found if isinstance(url, str) and url))
