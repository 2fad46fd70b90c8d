"""The colours of a picture: the Okabe–Ito palette, the colour of each family of reasons, the fills."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from ..reasons import Reason

#: The Okabe–Ito palette (Okabe & Ito, *Color Universal Design*, 2008): eight colours told apart
#: with every common colour-vision deficiency. Every mark of the picture is one of these, or a
#: tint of one (the fills).
OKABE_ITO: Final[Mapping[str, str]] = {
    "black": "#000000",
    "orange": "#e69f00",
    "sky_blue": "#56b4e9",
    "bluish_green": "#009e73",
    "yellow": "#f0e442",
    "blue": "#0072b2",
    "vermillion": "#d55e00",
    "reddish_purple": "#cc79a7",
}


class _Family(NamedTuple):
    """Reasons drawn in one colour: those of one group of rules (the key names the rule)."""

    name: str
    colour: str
    rule: str
    reasons: tuple[Reason, ...]


# Six families, six hues: a picture can tell the rule apart at a glance, the label gives the code.
# missing_prev (orange) and the other §7 order rules (blue) differ in hue and in lightness.
_FAMILIES: Final = (
    _Family(
        "identity",
        OKABE_ITO["black"],
        "§6 checks 1–5: encoding and identity",
        (
            Reason.NON_CANONICAL_JSON,
            Reason.UNSUPPORTED_SCHEMA_VERSION,
            Reason.MALFORMED,
            Reason.EVENT_ID_MISMATCH,
            Reason.CONTENT_HASH_MISMATCH,
        ),
    ),
    _Family(
        "content",
        OKABE_ITO["sky_blue"],
        "§6 checks 6–8, 14–16: subject, type, target, payload",
        (
            Reason.WRONG_SUBJECT,
            Reason.UNKNOWN_EVENT_TYPE,
            Reason.TARGET_MISMATCH,
            Reason.RECORD_NOT_GENESIS,
            Reason.BAD_PAYLOAD,
            Reason.BAD_RECEIPT,
        ),
    ),
    _Family(
        "signature",
        OKABE_ITO["reddish_purple"],
        "§6 checks 9–13: keys and signatures",
        (
            Reason.UNKNOWN_KEY,
            Reason.KEY_MISMATCH,
            Reason.UNSUPPORTED_SIGNATURE,
            Reason.BAD_SIGNATURE,
            Reason.KEY_EXPIRED,
        ),
    ),
    _Family(
        "missing", OKABE_ITO["orange"], "§7: its prev_event names no admitted event", (Reason.MISSING_PREV,)
    ),
    _Family(
        "order",
        OKABE_ITO["blue"],
        "§7: its prev is not applied, of another chain, or later",
        (Reason.INVALID_PREV, Reason.PREV_WRONG_CHAIN, Reason.CREATED_BEFORE_PREV),
    ),
    _Family("fork", OKABE_ITO["vermillion"], "§7: a fork (equivocation)", (Reason.EQUIVOCATION,)),
)
_FAMILY_OF: Final = {reason: family for family in _FAMILIES for reason in family.reasons}
# A family's mark in the key (see _marks).
_FAMILY_MARKS: Final = {f"invalid:{family.name}": family for family in _FAMILIES}

#: The colour of each reason code: the Okabe–Ito colour of its family of rules (see the key of a
#: picture): black §6 encoding and identity, sky blue subject, type, target and payload, reddish
#: purple keys and signatures, orange ``missing_prev``, blue the other §7 order rules, vermillion
#: ``equivocation`` (the colour of the fork boxes).
REASON_COLOURS: Final[Mapping[Reason, str]] = {reason: _FAMILY_OF[reason].colour for reason in Reason}

_APPLIED_FILL: Final = "#a6ddce"  # bluish green, 35 % on white
_APPLIED_LINE: Final = OKABE_ITO["bluish_green"]
_SUPERSEDED_FILL: Final = "#d9f0ea"  # bluish green, 15 % on white
_SUPERSEDED_LINE: Final = "#80cfb9"  # bluish green, 50 % on white
_GHOST_LINE: Final = OKABE_ITO["orange"]
_FORK_LINE: Final = OKABE_ITO["vermillion"]
_MUTED: Final = "#5f6368"
_LANE_LINE: Final = "#c8ccd0"
_EDGE: Final = "#3c4043"
_TEXT: Final = "#202124"
