"""The JSON Schemas (draft 2020-12) of the ``--json`` documents of ``pith-merge``, one per format.

Every ``--json`` document names its format and version in its top-level ``"format"`` field,
``pith-merge.NAME/VERSION`` (:data:`FORMATS`); the schema of that format ships in this package as
the file ``pith-merge.NAME-VERSION.json`` (:func:`schema_file`). The schemas are data only: nothing
here validates (a consumer brings its own validator, such as ``jsonschema``). What may change
within a version, and what needs a new one, is in docs/cli.md ("JSON output"); every format, with
an example, in docs/json.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import msgspec

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

__all__ = ["FORMATS", "schema", "schema_file"]

#: Each command's document → its format name and version, the value of its ``"format"`` field.
FORMATS: Final[Mapping[str, str]] = {
    "verify": "pith-merge.verify/1",
    "replay": "pith-merge.replay/1",
    "explain": "pith-merge.explain/1",
    "diff": "pith-merge.diff/1",
    "audit": "pith-merge.audit/1",
    "keys": "pith-merge.keys/1",
    "store-import": "pith-merge.store-import/1",
    "store-check": "pith-merge.store-check/1",
    "monitor-round": "pith-merge.monitor-round/1",
    "monitor-health": "pith-merge.monitor-health/1",
    "monitor-status": "pith-merge.monitor-status/1",
    "monitor-alarm": "pith-merge.monitor-alarm/1",
    "monitor-log": "pith-merge.monitor-log/1",
}


def schema_file(format_name: str) -> Traversable:
    """The schema file of ``format_name`` (``pith-merge.verify/1`` → ``pith-merge.verify-1.json``).

    Raises :class:`KeyError` for a format that is not one of :data:`FORMATS`.
    """
    if format_name not in FORMATS.values():
        raise KeyError(format_name)
    from importlib.resources import files  # read only when asked for: no command reads a schema

    return files(__name__).joinpath(format_name.replace("/", "-") + ".json")


def schema(format_name: str) -> dict[str, Any]:
    """The JSON Schema of ``format_name``, as a JSON object (see :func:`schema_file`)."""
    document: dict[str, Any] = msgspec.json.decode(schema_file(format_name).read_bytes())
    return document
