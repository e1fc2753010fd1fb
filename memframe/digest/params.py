"""Validation of the digest parameters, run before anything is read (reference 1.1)."""

from __future__ import annotations

import datetime as _dt
import json

from memframe.errors import DigestParameterError, InvalidInputError
from memframe.text import check_instant

__all__ = ["HEADLINES_MAX", "list_cap", "validate_project_prefix", "validate_headlines",
           "validate_now", "validate_verify", "quoted", "VERIFY_MODES"]

#: Unicode White_Space: what the reference's ``str::trim`` strips (narrower than str.strip()).
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

HEADLINES_DEFAULT = 10
#: how the journal chain is verified: from the verified checkpoint on, or in full
VERIFY_MODES = ("incremental", "full")


def quoted(text: str) -> str:
    """A value quoted for a teaching message: a JSON-style double-quoted string.

    Examples:
        >>> print(quoted('nott/"x"'))
        "nott/\\"x\\""
    """
    return json.dumps(text, ensure_ascii=False)


def validate_project_prefix(project_prefix: str | None) -> str | None:
    """Reject a prefix that can match nothing, with the reference's teaching messages.

    ``None`` means unfenced. A prefix that is blank after trimming, or that ends with the
    subtree separator ``/``, raises :class:`~memframe.errors.DigestParameterError`.
    Nothing else is normalised: ``" nott"`` is accepted and simply matches nothing.

    Examples:
        >>> validate_project_prefix("nott")
        'nott'
        >>> validate_project_prefix("nott//")
        Traceback (most recent call last):
        ...
        memframe.errors.DigestParameterError: project_prefix "nott//" ends with the subtree separator and can match no project id — pass "nott" (the engine adds "/" itself: it matches the prefix exactly or prefix + "/...")
    """
    if project_prefix is None:
        return None
    if not isinstance(project_prefix, str):
        raise InvalidInputError(
            f"project_prefix must be a string or None, got {type(project_prefix).__name__}"
        )
    if not project_prefix.strip(_WHITE_SPACE):
        raise DigestParameterError(
            "project_prefix is empty — it can match no project id; omit the field to search "
            'unfenced, or pass a subtree root like "nott"'
        )
    if project_prefix.endswith("/"):
        raise DigestParameterError(
            f"project_prefix {quoted(project_prefix)} ends with the subtree separator and can "
            f"match no project id — pass {quoted(project_prefix.rstrip('/'))} (the engine adds "
            f'"/" itself: it matches the prefix exactly or prefix + "/...")'
        )
    return project_prefix


#: the largest ``headlines``: the engine's parameter is an unsigned 64-bit count (a larger
#: one fails its deserialisation, reference 1.1)
HEADLINES_MAX = 2**64 - 1
#: the cap the lists are cut at for any larger ``headlines`` (Polars' row counts and
#: ``top_k`` take 32-bit lengths; no digest lists this many rows)
_CAP_MAX = 2**31 - 1


def validate_headlines(headlines: object) -> int:
    """The list cap N: a non-negative int up to `HEADLINES_MAX` (``bool`` is refused);
    None is the default, as an absent ``headlines`` is in the reference (1.1).

    Examples:
        >>> validate_headlines(3), validate_headlines(None)
        (3, 10)
        >>> validate_headlines("ten")
        Traceback (most recent call last):
        ...
        memframe.errors.InvalidInputError: headlines requires a non-negative integer, got "ten"
    """
    if headlines is None:
        return HEADLINES_DEFAULT
    if isinstance(headlines, bool) or not isinstance(headlines, int) or headlines < 0:
        shown = quoted(headlines) if isinstance(headlines, str) else repr(headlines)
        raise InvalidInputError(f"headlines requires a non-negative integer, got {shown}")
    if headlines > HEADLINES_MAX:
        raise InvalidInputError(
            f"headlines is an unsigned 64-bit count (at most {HEADLINES_MAX}), got "
            f"{headlines}; any cap at or above the number of capsules lists them all")
    return headlines


def list_cap(headlines: int) -> int:
    """The cap the lists are cut at: ``headlines`` (validated), or a cap no list reaches
    when it is larger than Polars' lengths hold (the lists are the same).

    Examples:
        >>> list_cap(10), list_cap(2**64 - 1) == 2**31 - 1
        (10, True)
    """
    return min(headlines, _CAP_MAX)


def validate_now(now: object) -> _dt.datetime:
    """An aware datetime, converted to UTC."""
    if not isinstance(now, _dt.datetime) or now.tzinfo is None or now.utcoffset() is None:
        raise InvalidInputError(
            f"now must be a timezone-aware datetime (e.g. datetime.now(timezone.utc)), got {now!r}"
        )
    try:
        utc = now.astimezone(_dt.UTC)
    except OverflowError:  # an offset that carries it past year 1 or 9999
        raise InvalidInputError(f"now={now!r} cannot be expressed in UTC; give an instant "
                                f"between 1677-09-21 and 2262-04-11") from None
    return check_instant(utc, "now")  # the digest computes in nanoseconds: refuse up front


def validate_verify(verify: object) -> str:
    """The journal verification mode: ``"incremental"`` (default) or ``"full"``.

    Examples:
        >>> validate_verify("full")
        'full'
        >>> validate_verify("fast")
        Traceback (most recent call last):
        ...
        memframe.errors.InvalidInputError: verify must be "incremental" (check what is new against the verified checkpoint) or "full" (walk the whole journal chain), got 'fast'
    """
    if not isinstance(verify, str) or verify not in VERIFY_MODES:
        raise InvalidInputError(
            'verify must be "incremental" (check what is new against the verified checkpoint) '
            f'or "full" (walk the whole journal chain), got {verify!r}'
        )
    return verify
