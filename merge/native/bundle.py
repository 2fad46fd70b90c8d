"""A bundle's text read on the compiled path (the door ``native/src/py/bundle.rs``): its members
split as a decode would, its events and members written canonically, ``bundle_sha256``; and a
batch of bundle texts judged there (:func:`judge_bundles`), each decided only where it passes
§10's checks in the form that path holds to :mod:`merge.bundle`'s verdicts."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from .. import signatures
from . import _extension, native_available
from .fold import key_table

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor  # (imported where a reader starts one)

    import pith_merge_native
    from pith_merge_native import JudgedBundle

    from ..keys import KeySet
else:
    JudgedBundle = Any

__all__ = ["READ_AHEAD", "BundleRead", "BundleReader", "judge_bundles", "read_bundle"]


class BundleRead(NamedTuple):
    """A bundle's text as the compiled path read it (:func:`read_bundle`)."""

    #: Each member but ``events``, in key order: ``(key, its raw text, CJ of it or None)``.
    members: list[tuple[str, bytes, bytes | None]]
    #: ``CJ`` of each event (§1), or ``None`` where that path did not write it.
    events: list[bytes | None]
    #: Each event's ``(event_id, SHA-256 of its CJ, prev_event or None)`` where §5 admits that
    #: text (an object of at most 1 MiB with an ``event_id`` of §4's form), else ``None``; read
    #: with a ``cache`` only (an audit's snapshots), else all ``None``.
    identities: list[tuple[str, bytes, str | None] | None]
    #: ``bundle_sha256`` (§2), or ``None`` unless every member and event was written there.
    bundle_sha256: str | None


#: How many bundles a :class:`BundleReader` reads ahead of the one asked for.
READ_AHEAD: Final = 2


class BundleReader:
    """Reads the bundles of one run (an audit) on the compiled path (:func:`read_bundle`): with
    one cache of the events' canonical texts, so that each is written once a run, and with the
    texts to come (``ahead``) read in order on a thread of its own, :data:`READ_AHEAD` at most
    before the one asked for, while the caller works on the one before (reading a bundle lets go
    of the GIL). A context manager: leaving it stops the thread."""

    def __init__(self, ahead: Iterable[Any] = ()) -> None:
        serving = native_available()
        self.cache: pith_merge_native.BundleCache | None = _extension().BundleCache() if serving else None
        self._texts = deque(text for text in ahead if type(text) in (bytes, str)) if serving else deque()
        self._pending: deque[tuple[Any, Future[BundleRead | None]]] = deque()
        self._thread: ThreadPoolExecutor | None = None
        if self._texts:
            from concurrent.futures import ThreadPoolExecutor

            self._thread = ThreadPoolExecutor(1, thread_name_prefix="pith-merge-read")
        self._fill()

    def __enter__(self) -> BundleReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            self._thread.shutdown(cancel_futures=True)

    def _fill(self) -> None:
        while self._thread is not None and self._texts and len(self._pending) < READ_AHEAD:
            text = self._texts.popleft()
            # One thread: the caller's fold keeps the cores busy meanwhile.
            self._pending.append((text, self._thread.submit(read_bundle, text, 1, self.cache)))

    def read(self, text: Any, threads: int | None) -> BundleRead | None:
        """:func:`read_bundle` of ``text``: read ahead already when it is the next text given."""
        if self._pending and self._pending[0][0] is text:
            _, reading = self._pending.popleft()
            self._fill()
            return reading.result()
        return read_bundle(text, threads, self.cache)


def read_bundle(text: Any, threads: int | None, cache: Any = None) -> BundleRead | None:
    """A bundle given as a JSON text (exactly ``bytes`` or ``str``) read on the compiled path:
    its members split as a decode would (the last of duplicate keys winning), its events and
    members written canonically on ``threads`` threads, and ``bundle_sha256`` computed over
    those bytes. ``None`` when that path does not serve (:func:`merge.native_available`), or the text
    is no object with an ``events`` array for it: the pure path then decodes it (and says why).
    ``cache``: a :class:`BundleReader`'s, for the bundles of one run."""
    if not native_available():
        return None
    read = _extension().read_bundle(text, signatures.thread_count(threads), cache)
    if read is None:
        return None
    return BundleRead(read.members, read.events, read.identities, read.bundle_sha256)


def judge_bundles(
    texts: list[Any], trusted: KeySet, key_sets: Mapping[bytes, KeySet]
) -> list[JudgedBundle | bytes | None] | None:
    """Each of ``texts`` read whole and judged by §10's checks on the compiled path, in one call
    without the GIL (``native/src/bundle.rs``'s ``judge_texts``): a ``JudgedBundle`` where it
    passed every check but ``source_aliases`` (``small``, its members but ``events`` and
    ``state`` as one object of their raw texts, for Python to decode in one call; each member's
    canonical text, by ``member_text(name)`` or all as ``written``, and its events' canonical
    texts, made when asked for; ``bundle_sha256``, ``H(canonical_record)``, the trusted key's
    id and the fold's state, its ``state_sha256`` and supersessions); the canonical text of its
    ``public_keys`` where only that key set, not among ``key_sets`` (by that text), is wanting;
    ``None`` for :mod:`merge.bundle` to judge. ``trusted``: the keys of bundle signatures.
    ``None`` when the compiled path does not serve."""
    if not native_available():
        return None
    tables = {text: key_table(keys) for text, keys in key_sets.items()}
    judged: list[JudgedBundle | bytes | None] = _extension().judge_bundles(texts, key_table(trusted), tables)
    return judged
