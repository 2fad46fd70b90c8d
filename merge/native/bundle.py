"""A bundle's text read on the compiled path (the door ``native/src/py/bundle.rs``): its members
split as a decode would, its events and members written canonically, ``bundle_sha256``; and a
batch of bundle texts judged there (:func:`judge_bundles`), each decided only where it passes
§10's checks in the form that path holds to :mod:`merge.bundle`'s verdicts."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from .. import signatures
from . import _extension, native_available
from .fold import key_table

if TYPE_CHECKING:
    import pith_merge_native
    from pith_merge_native import JudgedBundle

    from ..keys import KeySet
else:
    JudgedBundle = Any

__all__ = ["READ_AHEAD", "BundleRead", "BundleReader", "Unread", "judge_bundles", "read_bundle"]


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
    #: Read with a ``fold`` (:func:`read_bundle`): the events' judgement as they were written
    #: (``pith_merge_native.Judgement``, to finish as a fold's) and the indices (ascending) of
    #: those it leaves to the pure path; else ``None``.
    judged: tuple[pith_merge_native.Judgement, list[int]] | None = None


#: How many bundles a :class:`BundleReader` reads ahead of the one asked for.
READ_AHEAD: Final = 2


class Unread:
    """A bundle text not read yet (a file): ``load()`` returns it. A :class:`BundleReader` given
    it among the texts ahead loads it on its own thread, just before it reads it, so that the
    caller's work on the snapshots before it goes on meanwhile."""

    __slots__ = ("load",)

    def __init__(self, load: Callable[[], bytes | str]) -> None:
        self.load = load


class _Reading:
    """A text a :class:`BundleReader` reads ahead (``given``: the text, or the :class:`Unread`
    one, loaded into ``text``): its read, or what the load or the read raised, once ``done``
    is set."""

    __slots__ = ("done", "error", "given", "read", "text")

    def __init__(self, given: Any) -> None:
        self.given = given
        self.text: Any = None if type(given) is Unread else given
        self.done = threading.Event()
        self.read: BundleRead | None = None
        self.error: BaseException | None = None


class BundleReader:
    """Reads the bundles of one run (an audit) on the compiled path (:func:`read_bundle`): with
    one cache of the events' canonical texts, so that each is written once a run, and with the
    texts to come (``ahead``) read in order on a thread of its own, :data:`READ_AHEAD` at most
    before the one asked for, while the caller works on the one before (reading a bundle lets go
    of the GIL); an :class:`Unread` text among them is loaded there too (:meth:`text`). A context
    manager: leaving it stops the thread. Where no thread can be started, each text is loaded
    and read when asked for, on the caller's thread."""

    def __init__(self, ahead: Iterable[Any] = ()) -> None:
        serving = native_available()
        self.cache: pith_merge_native.BundleCache | None = _extension().BundleCache() if serving else None
        readings = [_Reading(text) for text in ahead if type(text) in (bytes, str, Unread)] if serving else []
        self._pending = deque(readings)
        # A permit a read ahead: the thread takes one before each read, the caller gives one
        # back as it takes a read.
        self._permits = threading.Semaphore(READ_AHEAD)
        self._stopping = False
        self._thread: threading.Thread | None = None
        if readings:
            # A plain thread, not a pool: concurrent.futures is 4-15 ms of imports for one worker.
            thread = threading.Thread(
                target=self._read_ahead, args=(readings,), name="pith-merge-read", daemon=True
            )
            try:
                thread.start()
            except RuntimeError:  # no thread to spare (issue 29 item 3): each read when asked for
                self._pending.clear()
            else:
                self._thread = thread

    def __enter__(self) -> BundleReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._thread is not None:
            self._stopping = True
            self._permits.release()  # (a thread waiting for a permit sees it stop)
            self._thread.join()

    def _read_ahead(self, readings: list[_Reading]) -> None:
        for reading in readings:
            self._permits.acquire()
            if self._stopping:
                return
            try:
                if reading.text is None:
                    reading.text = reading.given.load()
                # One thread: the caller's fold keeps the cores busy meanwhile.
                reading.read = read_bundle(reading.text, 1, self.cache)
            except BaseException as error:  # raised where the text or its read is asked for
                reading.error = error
            reading.done.set()

    def text(self, given: Any) -> Any:
        """The text ``given`` stands for: an :class:`Unread` one loaded (on the thread when it
        is the next text given, else now), any other as it is."""
        if type(given) is not Unread:
            return given
        if self._pending and self._pending[0].given is given:
            reading = self._pending[0]
            reading.done.wait()
            if reading.text is None:  # the load raised: nothing to read
                error = reading.error
                self._handed_over()
                assert error is not None
                raise error
            return reading.text
        return given.load()

    def read(self, text: Any, threads: int | None) -> BundleRead | None:
        """:func:`read_bundle` of ``text``: read ahead already when it is the next text given."""
        if self._pending and text is not None and self._pending[0].text is text:  # (None: not loaded)
            reading = self._pending[0]
            reading.done.wait()
            read, error = reading.read, reading.error
            self._handed_over()
            if error is not None:
                raise error
            return read
        return read_bundle(text, threads, self.cache)

    def _handed_over(self) -> None:
        """The next reading, handed over: a permit given back, and nothing of it kept (the
        thread holds its list of readings until it ends)."""
        reading = self._pending.popleft()
        self._permits.release()
        reading.read = reading.error = reading.text = None


#: What a bundle's events are judged as while they are read (:func:`read_bundle`'s ``fold``):
#: from its members but ``events`` and ``state`` (``[(key, raw text)]``), the fold's subject and
#: key set, or ``None`` (then they are only read).
FoldContext = Callable[[list[tuple[str, bytes]]], "tuple[str, KeySet] | None"]


def read_bundle(
    text: Any, threads: int | None, cache: Any = None, fold: FoldContext | None = None
) -> BundleRead | None:
    """A bundle given as a JSON text (exactly ``bytes`` or ``str``) read on the compiled path:
    its members split as a decode would (the last of duplicate keys winning), its events and
    members written canonically on ``threads`` threads, and ``bundle_sha256`` computed over
    those bytes. ``None`` when that path does not serve (:func:`merge.native_available`), or the text
    is no object with an ``events`` array for it: the pure path then decodes it (and says why).
    ``cache``: a :class:`BundleReader`'s, for the bundles of one run. ``fold`` (without a
    ``cache``): asked once the text is split, what to judge its events as; each event is then
    judged as it is written, on the same threads, parsed once for both (:attr:`BundleRead.judged`)."""
    if not native_available():
        return None
    context = None if fold is None else _fold_context(fold)
    read = _extension().read_bundle(text, signatures.thread_count(threads), cache, context)
    if read is None:
        return None
    return BundleRead(read.members, read.events, read.identities, read.bundle_sha256, read.judged)


def _fold_context(fold: FoldContext) -> Callable[[list[tuple[str, bytes]]], Any]:
    """``fold`` as the compiled reader asks it: its key set as that path's key table."""

    def context(members: list[tuple[str, bytes]]) -> tuple[str, list[pith_merge_native.Key]] | None:
        found = fold(members)
        return None if found is None else (found[0], key_table(found[1]))

    return context


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
