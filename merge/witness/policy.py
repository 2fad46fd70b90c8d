"""Witness policies (C2SP tlog-policy): which witnesses a client knows, and how many must agree.

    witness w1 example.org/w1+1a2b3c4d+BB… http://127.0.0.1:9464
    witness w2 example.org/w2+5e6f7a8b+BB…
    group two-of-two 2 w1 w2
    quorum two-of-two

Lines are ``log <vkey> [<url>]`` (accepted, and not used: the registry's bundle signature is
what binds a bundle to the registry, checked by §10), ``witness <name> <vkey> [<url>]``,
``group <name> all|any|<k> <member>…`` and exactly one ``quorum <name>`` (``none``: no
cosignature needed). Items are separated by spaces and tabs only; ``#`` starts a comment line.
A group or the quorum names only what earlier lines defined; a name is a member at most once;
a public key is one witness's only. Witness keys are ``cosignature/v1`` vkeys (type 0x04).
Every breach is a :class:`merge.PolicyError` naming its line. Pure: the caller reads the file.
"""

from __future__ import annotations

import re
from collections.abc import Set
from typing import Final

import msgspec

from ..errors import NoteError, PolicyError
from .note import COSIGNATURE_V1, VerifierKey, parse_vkey

__all__ = ["Group", "Policy", "Witness", "parse_policy"]

#: The predefined name of the empty quorum (tlog-policy).
NONE: Final = "none"
#: Bounds that keep a policy's evaluation small (tlog-policy recommends supporting 32 of each).
MAX_ENTRIES: Final = 1024
_SPACES: Final = re.compile(r"[ \t]+")
_ALLOWED: Final = re.compile(rb"[\t\n\x20-\x7e\x80-\xff]*")


class Witness(msgspec.Struct, frozen=True):
    """A ``witness`` line: the policy's name for it, its vkey, its URL (None: offline only)."""

    name: str
    vkey: VerifierKey
    url: str | None = None


class Group(msgspec.Struct, frozen=True):
    """A ``group`` line: it witnesses when at least ``threshold`` of ``members`` do."""

    name: str
    threshold: int
    members: tuple[str, ...]


class Policy(msgspec.Struct, frozen=True):
    """A parsed policy (:func:`parse_policy`)."""

    witnesses: tuple[Witness, ...]
    groups: tuple[Group, ...]
    #: The name of a witness or group, or ``none``.
    quorum: str
    logs: tuple[tuple[VerifierKey, str | None], ...] = ()

    def witness(self, name: str) -> Witness | None:
        """The witness of that name, if any."""
        return next((witness for witness in self.witnesses if witness.name == name), None)

    def satisfied(self, agreeing: Set[str]) -> bool:
        """Whether the quorum holds when exactly the witnesses named in ``agreeing`` cosigned."""
        groups = {group.name: group for group in self.groups}
        memo: dict[str, bool] = {}

        def holds(name: str) -> bool:
            if name not in memo:
                group = groups.get(name)
                if group is None:
                    memo[name] = name in agreeing
                else:
                    memo[name] = sum(holds(member) for member in group.members) >= group.threshold
            return memo[name]

        return self.quorum == NONE or holds(self.quorum)


def parse_policy(data: bytes | str) -> Policy:
    """A policy file's bytes (or text) as a :class:`Policy`; :class:`merge.PolicyError` at the
    first line that breaks tlog-policy, or when there is no quorum line."""
    raw = _encoded(data) if isinstance(data, str) else bytes(data)
    if not _ALLOWED.fullmatch(raw):
        position = next(i for i, byte in enumerate(raw) if not _ALLOWED.fullmatch(raw[i : i + 1]))
        number = raw.count(b"\n", 0, position) + 1
        raise PolicyError(f"control character 0x{raw[position]:02x} (only tab and newline)", line=number)
    # Octets with the high bit set are opaque (tlog-policy §"Character set"): kept as they are.
    text = raw.decode("utf-8", "surrogateescape")
    builder = _Builder()
    for number, line in enumerate(text.split("\n"), 1):
        fields = [field for field in _SPACES.split(line.strip(" \t")) if field]
        if not fields or fields[0].startswith("#"):
            continue
        try:
            builder.line(fields)
        except PolicyError as exc:
            raise PolicyError(exc.problem, line=number) from None
    return builder.policy()


def _encoded(text: str) -> bytes:
    """The bytes of a policy given as text (bytes a ``surrogateescape`` decoding kept come back);
    :class:`merge.PolicyError` at a lone surrogate no bytes give, which no file holds."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        number = text.count("\n", 0, exc.start) + 1
        problem = f"lone surrogate U+{ord(text[exc.start]):04X} (no UTF-8 holds it)"
        raise PolicyError(problem, line=number) from None


class _Builder:
    def __init__(self) -> None:
        self.names: dict[str, Witness | Group] = {}
        self.keys: dict[bytes, str] = {}
        self.logs: list[tuple[VerifierKey, str | None]] = []
        self.quorum: str | None = None

    def line(self, fields: list[str]) -> None:
        keyword, arguments = fields[0], fields[1:]
        if len(self.names) + len(self.logs) >= MAX_ENTRIES:
            raise PolicyError(f"more than {MAX_ENTRIES} logs, witnesses and groups")
        if keyword == "log":
            self._log(arguments)
        elif keyword == "witness":
            self._witness(arguments)
        elif keyword == "group":
            self._group(arguments)
        elif keyword == "quorum":
            self._quorum(arguments)
        else:
            raise PolicyError(f"unknown keyword {keyword!r} (log, witness, group, quorum)")

    def _vkey(self, text: str) -> VerifierKey:
        try:
            vkey = parse_vkey(text)
        except NoteError as exc:
            raise PolicyError(exc.problem) from None
        if vkey.public_key in self.keys:
            raise PolicyError(f"the public key of {vkey.name} is already {self.keys[vkey.public_key]}'s")
        return vkey

    def _log(self, arguments: list[str]) -> None:
        if len(arguments) not in (1, 2):
            raise PolicyError("a log line is 'log <vkey> [<url>]'")
        vkey = self._vkey(arguments[0])
        self.keys[vkey.public_key] = f"log {vkey.name}"
        self.logs.append((vkey, arguments[1] if len(arguments) == 2 else None))

    def _new_name(self, name: str) -> None:
        if name == NONE:
            raise PolicyError("'none' is predefined: no witness or group is called so")
        if name in self.names:
            raise PolicyError(f"{name!r} is already defined")

    def _witness(self, arguments: list[str]) -> None:
        if len(arguments) not in (2, 3):
            raise PolicyError("a witness line is 'witness <name> <vkey> [<url>]'")
        name = arguments[0]
        self._new_name(name)
        vkey = self._vkey(arguments[1])
        if vkey.signature_type != COSIGNATURE_V1:
            raise PolicyError(
                f"witness {name}'s vkey is type 0x{vkey.signature_type:02x}, not 0x04 (cosignature/v1)"
            )
        self.keys[vkey.public_key] = f"witness {name}"
        self.names[name] = Witness(name, vkey, arguments[2] if len(arguments) == 3 else None)

    def _group(self, arguments: list[str]) -> None:
        if len(arguments) < 3:
            raise PolicyError("a group line is 'group <name> all|any|<k> <member>…' with one member or more")
        name, threshold_text, members = arguments[0], arguments[1], arguments[2:]
        self._new_name(name)
        for member in members:
            if member == NONE:
                raise PolicyError("'none' is no group member")
            if member not in self.names:
                raise PolicyError(f"group member {member!r} is not defined on an earlier line")
        if len(set(members)) != len(members):
            raise PolicyError(f"group {name} lists a member twice")
        if threshold_text == "all":
            threshold = len(members)
        elif threshold_text == "any":
            threshold = 1
        elif re.fullmatch(r"[1-9][0-9]{0,5}", threshold_text) and int(threshold_text) <= len(members):
            threshold = int(threshold_text)
        else:
            raise PolicyError(
                f"group {name}'s threshold {threshold_text!r} is not all, any or 1 to {len(members)}"
            )
        self.names[name] = Group(name, threshold, tuple(members))

    def _quorum(self, arguments: list[str]) -> None:
        if len(arguments) != 1:
            raise PolicyError("a quorum line is 'quorum <name>'")
        if self.quorum is not None:
            raise PolicyError("a second quorum line (a policy has exactly one)")
        if arguments[0] != NONE and arguments[0] not in self.names:
            raise PolicyError(f"quorum {arguments[0]!r} is not defined on an earlier line")
        self.quorum = arguments[0]

    def policy(self) -> Policy:
        if self.quorum is None:
            raise PolicyError(
                "no quorum line (a policy has exactly one; 'quorum none' asks for no cosignature)"
            )
        witnesses = tuple(entry for entry in self.names.values() if isinstance(entry, Witness))
        groups = tuple(entry for entry in self.names.values() if isinstance(entry, Group))
        return Policy(witnesses, groups, self.quorum, tuple(self.logs))
