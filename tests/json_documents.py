"""The ``--json`` documents of ``pith-merge``, checked against the schema each names.

:func:`validated` is how a test reads a ``--json`` document: it parses it, finds the schema of
the format its top-level ``"format"`` names (as shipped in the package, :mod:`merge.schemas`) and
validates it with ``jsonschema`` (draft 2020-12), so an undocumented or missing field fails the test.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from jsonschema import Draft202012Validator

from merge.schemas import FORMATS, schema


@functools.cache
def validator(format_name: str) -> Draft202012Validator:
    """The validator of ``format_name``'s schema (one of :data:`merge.schemas.FORMATS`)."""
    return Draft202012Validator(schema(format_name))


def validated(text: str | bytes, command: str) -> Any:
    """The ``--json`` document ``text`` of ``command`` (a key of :data:`merge.schemas.FORMATS`),
    parsed, once it names that command's format and is valid against the format's schema."""
    document = json.loads(text)
    assert isinstance(document, dict), f"a --json document is an object, not {type(document).__name__}"
    assert document.get("format") == FORMATS[command], document.get("format")
    validator(document["format"]).validate(document)
    return document
