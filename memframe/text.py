"""Pure text laws shared by the store, the digest and the audits.

* ``fold_term``: how a missed recall term is folded (reference 4.7).
* ``headline``: the single-line headline law (reference 2.7).
* ``rfc3339``: timestamps on the wire (reference 2.5), as a Polars expression.
"""

from __future__ import annotations

import datetime
import hashlib
import unicodedata
from collections.abc import Iterable
from typing import Any, overload

import polars as pl

from memframe.errors import InvalidInputError

__all__ = [
    "fold_term",
    "fold_terms",
    "fold_expr",
    "headline",
    "rfc3339",
    "rfc3339_text",
    "epoch_ns",
    "journal_lines",
    "HEADLINE_CHARS",
]

HEADLINE_CHARS = 140

# Unicode White_Space (what Rust's str::trim strips), not Python's wider isspace().
_WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

# The engine's closed fold table (reference 4.7): exactly these 82 lowercase Latin letters
# fold to a base letter, and no others. It is not a Unicode decomposition: letters such as
# "ș", "ț", "đ", "ơ", "ư", "ŷ", "ǎ", "ß", "æ" and "œ" stay as they are, so a miss term
# recorded by the engine ("bucurești") is already folded for memframe too.
_FOLD_GROUPS = (
    ("a", "àáâãäåāăą"), ("c", "çćĉċč"), ("d", "ď"), ("e", "èéêëēĕėęě"), ("g", "ĝğġģ"),
    ("h", "ĥ"), ("i", "ìíîïĩīĭįı"), ("j", "ĵ"), ("k", "ķ"), ("l", "ĺļľł"), ("n", "ñńņň"),
    ("o", "òóôõöøōŏő"), ("r", "ŕŗř"), ("s", "śŝşš"), ("t", "ţť"), ("u", "ùúûüũūŭůűų"),
    ("w", "ŵ"), ("y", "ýÿ"), ("z", "źżž"),
)
_FOLD = {letter: base for base, letters in _FOLD_GROUPS for letter in letters}
_FOLD_TRANSLATE = str.maketrans(_FOLD)


def fold_term(term: str) -> str:
    """Fold one term as the engine does: trim, Unicode lowercase, then the closed table
    of 82 Latin letters (reference 4.7); every other character is kept.

    Examples:
        >>> fold_term("  Retrieval ")
        'retrieval'
        >>> fold_term("Ça Łódź Ñandú")
        'ca lodz nandu'
        >>> fold_term("BUCUREȘTI đường")
        'bucurești đường'
    """
    trimmed = term.strip(_WHITE_SPACE)
    if trimmed.isascii() or not any(unicodedata.category(ch) == "Cn" for ch in trimmed):
        return trimmed.lower().translate(_FOLD_TRANSLATE)
    # A character this Python's Unicode tables do not know yet (say U+16EA0, Unicode 17)
    # may have a lowercase in the engine's newer tables; Polars carries those tables too,
    # so such a term is lowercased there and both folds agree.
    lowered = pl.Series([trimmed], dtype=pl.String).str.to_lowercase()[0]
    return str(lowered).translate(_FOLD_TRANSLATE)


def _has_alphanumeric(term: str) -> bool:
    return any(ch.isalnum() for ch in term)


def fold_terms(terms: Iterable[str]) -> list[str]:
    """Fold the terms of one query as the miss ledger records them (reference 4.7).

    Each term is folded; terms with no alphanumeric character are dropped, and a term
    that repeats within the call keeps only its first occurrence.

    Examples:
        >>> fold_terms(["Retreival", "retreival", "--", "Café"])
        ['retreival', 'cafe']
    """
    out: list[str] = []
    seen: set[str] = set()
    for raw in terms:
        term = fold_term(raw)
        if not _has_alphanumeric(term) or term in seen:
            continue
        seen.add(term)
        out.append(term)
    return out


def fold_expr(expr: pl.Expr) -> pl.Expr:
    """`fold_term` as a Polars expression (for vocabularies tokenised in Polars)."""
    keys = list(_FOLD)
    return (
        expr.str.strip_chars(_WHITE_SPACE)
        .str.to_lowercase()
        .str.replace_many(keys, [_FOLD[k] for k in keys])
    )


# Line boundaries of the headline law, CRLF first so it wins over a lone CR.
_BOUNDARIES = ("\r\n", "\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029")


def headline(content: str, limit: int = HEADLINE_CHARS) -> str:
    """The single-line headline of a text (reference 2.7).

    Examples:
        >>> headline("x\\n")
        'x'
        >>> headline("a\\nb")
        'a…'
        >>> headline("\\nabc")
        '…'
        >>> len(headline("y" * 150))
        141
    """
    cut = len(content)
    width = 0
    for boundary in _BOUNDARIES:
        at = content.find(boundary, 0, cut + len(boundary))
        if at != -1 and (at < cut or (at == cut and len(boundary) > width)):
            cut, width = at, len(boundary)
    first = content[:cut]
    more = width > 0 and cut + width < len(content)
    head = first[:limit]
    return head + "…" if len(first) > limit or more else head


_LINE = "".join(b for b in _BOUNDARIES if len(b) == 1)
_HEADLINE_PATTERN = rf"(?s)^([^{_LINE}]*)(\r\n|[{_LINE}])?(.*)$"


def headline_expr(expr: pl.Expr, limit: int = HEADLINE_CHARS) -> pl.Expr:
    """`headline` as a Polars expression (null text reads as empty).

    Examples:
        >>> import polars as pl
        >>> df = pl.DataFrame({"c": ["x\\n", "a\\nb", "y" * 150, None]})
        >>> [len(h) if len(h) > 10 else h for h in df.select(headline_expr(pl.col("c")))
        ...  .to_series().to_list()]
        ['x', 'a…', 141, '']
    """
    parts = expr.fill_null("").str.extract_groups(_HEADLINE_PATTERN)  # one regex pass
    first = parts.struct[0]
    more = parts.struct[2].str.len_bytes() > 0
    head = first.str.slice(0, limit)
    return (pl.when((first.str.len_chars() > limit) | more).then(head + pl.lit("…"))
            .otherwise(head))


def rfc3339(expr: pl.Expr) -> pl.Expr:
    """Format a UTC Datetime column as RFC3339 with ``Z`` and trimmed fractional zeros.

    Examples:
        >>> import polars as pl
        >>> s = pl.Series(["2026-07-21T23:36:24.016162617Z", "2026-07-23T12:00:00Z"])
        >>> t = s.str.to_datetime(time_unit="ns", time_zone="UTC")
        >>> pl.select(rfc3339(pl.lit(t))).to_series().to_list()
        ['2026-07-21T23:36:24.016162617Z', '2026-07-23T12:00:00Z']
    """
    expr = expr.dt.convert_time_zone("UTC")
    whole = expr.dt.strftime("%Y-%m-%dT%H:%M:%S")
    nanos = expr.dt.nanosecond()
    fraction = (
        pl.when(nanos == 0)
        .then(pl.lit(""))
        .otherwise(
            pl.lit(".")
            + nanos.cast(pl.String).str.zfill(9).str.strip_chars_end("0")
        )
    )
    return whole + fraction + pl.lit("Z")


def rfc3339_text(instant: datetime.datetime) -> str:
    """`rfc3339` for one Python datetime (microsecond precision; naive means UTC).

    Examples:
        >>> import datetime as dt
        >>> rfc3339_text(dt.datetime(2026, 7, 23, 12, 0, 0, 250000, tzinfo=dt.timezone.utc))
        '2026-07-23T12:00:00.25Z'
    """
    if instant.tzinfo is None:
        instant = instant.replace(tzinfo=datetime.UTC)
    instant = instant.astimezone(datetime.UTC)
    text = instant.strftime("%Y-%m-%dT%H:%M:%S")
    if instant.microsecond:
        text += "." + f"{instant.microsecond:06d}".rstrip("0")
    return text + "Z"


def journal_lines(journal: pl.DataFrame) -> pl.Series:
    """The canonical line of each journal row (reference 4.14), in the frame's order.

    Compact JSON ``{"seq","at","actor","action","subject","reason"}``: ``seq`` is the
    audit seq, ``at`` RFC3339 text, ``reason`` an explicit null when absent. The writer
    chains these lines and the digest's verifier recomputes them, with this one function.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> j = pl.DataFrame({"audit_seq": [1], "at": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)],
        ...     "actor": ["a"], "action": ["memory_ingest"], "subject": ["cap-1"],
        ...     "reason": [None]}, schema_overrides={"reason": pl.String})
        >>> journal_lines(j).to_list()
        ['{"seq":1,"at":"2026-01-01T00:00:00Z","actor":"a","action":"memory_ingest","subject":"cap-1","reason":null}']
    """
    if journal.height <= 4096:  # a few rows (those since a checkpoint): rendered in place
        at_text = journal.select(rfc3339(pl.col("at")).alias("at_text"))
    else:  # one RFC3339 rendering per distinct instant (a commit shares one)
        instants = journal.select(pl.col("at").unique())
        texts = instants.with_columns(rfc3339(pl.col("at")).alias("at_text"))
        at_text = journal.select("at").join(texts, on="at", how="left", maintain_order="left")
    fields = pl.DataFrame({
        "seq": journal["audit_seq"], "at": at_text["at_text"], "actor": journal["actor"],
        "action": journal["action"], "subject": journal["subject"], "reason": journal["reason"],
    })
    return _row_wise(fields, pl.struct(pl.all()).struct.json_encode().alias("line"))


#: from this many rows on, a row-wise expression runs on the streaming engine, its morsels
#: spread over the cores (the journal chain's lines and hashes: about 1.8x on two cores)
STREAM_ROWS = 65_536


def _row_wise(frame: pl.DataFrame, expr: pl.Expr) -> pl.Series:
    """``expr`` (one value per row, order kept) over ``frame``, as a series."""
    if frame.height < STREAM_ROWS:
        return frame.select(expr).to_series()
    return frame.lazy().select(expr).collect(engine="streaming").to_series()


@overload
def parse_instant(value: None, name: str = ...) -> None: ...
@overload
def parse_instant(value: datetime.date | str, name: str = ...) -> datetime.datetime: ...
@overload
def parse_instant(value: object, name: str = ...) -> datetime.datetime | None: ...
def parse_instant(value: object, name: str = "instant") -> datetime.datetime | None:
    """A caller's instant as an aware UTC datetime (None stays None).

    Takes a datetime (naive means UTC), a date (its midnight UTC) or ISO 8601 text
    (``Z`` accepted); anything else is refused naming the parameter.

    Examples:
        >>> parse_instant("2026-07-01T12:00:00Z", "since").isoformat()
        '2026-07-01T12:00:00+00:00'
        >>> parse_instant("2026-07-01", "until").isoformat()
        '2026-07-01T00:00:00+00:00'
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            if len(text) == 10:
                value = datetime.date.fromisoformat(text)
            else:
                value = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInputError(
                f"{name}={text!r} is not an ISO 8601 date or instant "
                f"(e.g. 2026-07-01 or 2026-07-01T12:00:00Z)"
            ) from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.UTC)
        try:
            return value.astimezone(datetime.UTC)
        except OverflowError:
            raise InvalidInputError(f"{name}={value!r} cannot be expressed in UTC") from None
    if isinstance(value, datetime.date):
        return datetime.datetime(value.year, value.month, value.day, tzinfo=datetime.UTC)
    raise InvalidInputError(
        f"{name} must be a datetime, a date or ISO 8601 text, got {type(value).__name__}"
    )


# Instants are stored as int64 nanoseconds since the epoch: this is the range that holds
# them (whole seconds, so the bounds read plainly in an error message).
INSTANT_MIN = datetime.datetime(1677, 9, 21, 0, 12, 44, tzinfo=datetime.UTC)
INSTANT_MAX = datetime.datetime(2262, 4, 11, 23, 47, 16, tzinfo=datetime.UTC)
_RANGE_TEXT = "1677-09-21T00:12:44Z..2262-04-11T23:47:16Z"


def epoch_ns(when: datetime.datetime) -> int:
    """An aware datetime as nanoseconds since the epoch, exactly (a Python int, which
    never wraps: compare instants through it where a difference could pass 292 years).

    Examples:
        >>> import datetime as dt
        >>> epoch_ns(dt.datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=dt.UTC))
        -500000000
    """
    since = when - datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return ((since.days * 86_400 + since.seconds) * 1_000_000 + since.microseconds) * 1_000


def _range_error(field: str, value: object) -> InvalidInputError:
    return InvalidInputError(
        f"{field}: {value} is outside the instants a store can hold ({_RANGE_TEXT}, "
        f"nanosecond precision); give an instant inside that range (a far-future "
        f"'never' is written as no value: leave the field empty)"
    )


def check_instant(value: datetime.datetime, field: str) -> datetime.datetime:
    """``value`` (aware) if a store can hold it, else a teaching error naming ``field``.

    Examples:
        >>> import datetime as dt
        >>> check_instant(dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "created_at").year
        2026
        >>> check_instant(dt.datetime(9999, 12, 31, tzinfo=dt.UTC), "valid_to")
        Traceback (most recent call last):
        ...
        memframe.errors.InvalidInputError: valid_to: 9999-12-31 00:00:00+00:00 is outside ...
    """
    if not INSTANT_MIN <= value <= INSTANT_MAX:
        raise _range_error(field, value)
    return value


def instants_ns(column: pl.Series, field: str) -> pl.Series:
    """A column of instants as ``Datetime("ns", "UTC")``, refusing what would wrap.

    Takes RFC3339 text (``Z`` or an offset), datetimes of any unit (naive means UTC) or
    an all-null column. Values outside `INSTANT_MIN`..`INSTANT_MAX` are refused with an
    error naming ``field`` instead of wrapping around silently.

    Examples:
        >>> instants_ns(pl.Series(["2026-07-23T12:00:00.000000001Z"]), "at").dt.nanosecond().item()
        1
        >>> instants_ns(pl.Series(["9999-12-31T00:00:00Z"]), "valid_to")
        Traceback (most recent call last):
        ...
        memframe.errors.InvalidInputError: valid_to: 9999-12-31T00:00:00Z is outside ...
    """
    ns = pl.Datetime("ns", "UTC")
    if column.dtype == pl.Null:
        return column.cast(ns)
    if column.dtype == pl.String:
        try:
            # microseconds reach +-290k years: a range check that cannot itself wrap
            wide = column.str.to_datetime(time_unit="us", time_zone="UTC")
        except pl.exceptions.PolarsError:
            bad = column.drop_nulls()
            parsed = bad.str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
            first = bad.filter(parsed.is_null())
            shown = first[0] if first.len() else (bad[0] if bad.len() else None)
            raise InvalidInputError(
                f"{field}: {shown!r} is not an RFC3339 timestamp (e.g. 2026-07-23T12:00:00Z)"
            ) from None
        _check_range(wide, column, field)
        return column.str.to_datetime(time_unit="ns", time_zone="UTC")
    if isinstance(column.dtype, pl.Datetime):
        if column.dtype.time_zone is None:
            column = column.dt.replace_time_zone("UTC")  # naive means UTC
        column = column.dt.convert_time_zone("UTC")
        _check_range(column, column, field)
        return column.dt.cast_time_unit("ns")
    raise InvalidInputError(f"{field} has dtype {column.dtype}; give datetimes or RFC3339 strings")


def _check_range(wide: pl.Series, shown: pl.Series, field: str) -> None:
    lo = pl.lit(INSTANT_MIN).cast(wide.dtype)
    hi = pl.lit(INSTANT_MAX).cast(wide.dtype)
    out = pl.select((pl.lit(wide) < lo) | (pl.lit(wide) > hi)).to_series().fill_null(False)
    if out.any():
        raise _range_error(field, shown[int(out.arg_true()[0])])


def _sha256_plugin(series: pl.Series, prefix: pl.Series | None) -> pl.Series | None:
    try:
        import polars_hash
    except ImportError:  # pragma: no cover - the plugin is a declared dependency
        return None
    value: Any = polars_hash.col("v") if prefix is None else polars_hash.col("p").add(pl.col("v"))
    frame = pl.DataFrame({"v": series} if prefix is None else {"p": prefix, "v": series})
    try:
        out = _row_wise(frame, value.chash.sha2_256())
    except Exception:  # noqa: BLE001 - a plugin that fails to load: use hashlib instead
        return None
    return out.rename(series.name)


def sha256_hex(series: pl.Series, *, prefix: pl.Series | None = None,
               vectorised: bool = True) -> pl.Series:
    """sha256 hex of each UTF-8 string (null stays null), vectorised where possible;
    with ``prefix`` (as long as ``series``), of each prefix followed by its string (joined
    as they are hashed, not first).

    Polars has no cryptographic hash of its own; the ``polars-hash`` plugin computes it
    natively. Should the plugin fail to load (an incompatible Polars), hashlib computes
    the same digests row by row, so results never depend on which path ran.

    Examples:
        >>> import polars as pl
        >>> sha256_hex(pl.Series(["abc"])).to_list()
        ['ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad']
        >>> sha256_hex(pl.Series(["c"]), prefix=pl.Series(["ab"])).to_list()
        ['ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad']
    """
    series = series.cast(pl.String)
    prefix = None if prefix is None else prefix.cast(pl.String)
    if vectorised:
        out = _sha256_plugin(series, prefix)
        if out is not None:
            return out
    if prefix is not None:
        series = (prefix + series).rename(series.name)
    sha256 = hashlib.sha256
    return pl.Series(
        series.name,
        [None if v is None else sha256(v.encode("utf-8")).hexdigest() for v in series.to_list()],
        dtype=pl.String,
    )
