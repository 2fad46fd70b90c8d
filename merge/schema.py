"""The event of spec §4 as typed msgspec Structs: its shape, checked in C as it is decoded.

A JSON text with exactly §4's keys and value types decodes straight into :class:`Event` (no
dicts, no Python walk); anything else is decoded as plain JSON and converted later, when
check 3 asks (:func:`merge.checks.precheck`). What a type cannot say (identifier patterns,
real timestamps, unique ``supersedes``) is checked in :mod:`merge.checks`.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ._compat import module_getattr
from .canonical import CanonicalStruct

__all__ = ["Event", "EventBody", "EventSignature", "Signer", "body_of"]

# gc=False: these hold JSON values only, never themselves, so no reference cycle can pass
# through them, and the collector need not track the millions a large fold makes.


class Signer(CanonicalStruct, frozen=True, gc=False, forbid_unknown_fields=True):
    """The ``signer`` object of §4: four strings. Who signed an event.

    One type for the event's field and for the state's entries (§9 copies the object as it is,
    and §7 compares it whole): an entry holds its event's signer itself, unconverted. Its
    strings come from a JSON text, so it is canonical-able (§1) by construction. A ``signer``
    with any other key is not of §4's shape, in an event (check 3) as in a state.
    """

    signer_id: str
    signer_type: str
    key_id: str
    public_key_fingerprint: str


class EventSignature(msgspec.Struct, frozen=True, gc=False, forbid_unknown_fields=True):
    """The ``signature`` object of §4: seven strings."""

    signature_status: str
    algorithm: str
    key_id: str
    public_key_fingerprint: str
    signature_b64: str
    signed_message: str
    signed_at: str


class EventBody(msgspec.Struct, frozen=True, gc=False):
    """The body of an event (§2): every field but ``signature``, ``content_sha256``, ``event_id``.

    Its canonical JSON is what ``content_sha256`` hashes (§6 check 5).
    """

    event_type: str
    subject_pith_number: str
    target: str
    payload: dict[str, Any]
    signer: Signer
    created_at: str
    supersedes: list[str]
    prev_event: str | None
    schema_version: str


class Event(EventBody, frozen=True, gc=False, forbid_unknown_fields=True):
    """An event with exactly the 12 keys of §4, each of its type."""

    signature: EventSignature
    content_sha256: str
    event_id: str


def body_of(event: Event) -> EventBody:
    """The body of ``event`` (§2), sharing its values."""
    return EventBody(
        event.event_type,
        event.subject_pith_number,
        event.target,
        event.payload,
        event.signer,
        event.created_at,
        event.supersedes,
        event.prev_event,
        event.schema_version,
    )


__getattr__ = module_getattr(__name__)  # the old name EventSigner (merge._compat)
