"""The recall-miss audit: what the agent looked for and did not find.

Everything is computed from one pinned generation of the store:

* ``recall_misses`` rows (reference 4.7: one folded term per row, outcome ``abstain`` or
  ``missing_evidence``) become a per-term table and a daily trend;
* ``lane_overrides`` rows (reference 4.8) become a daily trend per (forced, auto_pick) pair;
* the content of the **live** capsules, tokenised and folded exactly like miss terms,
  is the store's vocabulary; every missed term the vocabulary lacks gets its closest
  vocabulary terms as **alias proposals** (Levenshtein distance, computed by
  ``rapidfuzz``), with the number of live capsules holding each.

All frames are Polars DataFrames in a deterministic order; :class:`MissAudit` renders them
as JSON (deterministic bytes), plain text and self-contained HTML.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from memframe.errors import InvalidInputError
from memframe.schema import LANE_PAIRS, MISS_OUTCOMES
from memframe.text import fold_expr, parse_instant, rfc3339, rfc3339_text

__all__ = [
    "recall_misses",
    "MissAudit",
    "AliasRules",
    "vocabulary",
    "alias_proposals",
    "TERM_SCHEMA",
    "DAILY_SCHEMA",
    "LANE_DAILY_SCHEMA",
    "ALIAS_SCHEMA",
    "VOCABULARY_SCHEMA",
]

_TS = pl.Datetime("ns", "UTC")

TERM_SCHEMA: dict[str, pl.DataType] = {
    "term": pl.String(),
    "misses": pl.Int64(),
    "abstain": pl.Int64(),
    "missing_evidence": pl.Int64(),
    "first_seen": _TS,
    "last_seen": _TS,
    "days": pl.Int64(),
    "recurring": pl.Boolean(),
    "in_vocabulary": pl.Boolean(),
    "alias": pl.String(),
}
DAILY_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.Date(),
    "misses": pl.Int64(),
    "abstain": pl.Int64(),
    "missing_evidence": pl.Int64(),
    "terms": pl.Int64(),
    "new_terms": pl.Int64(),
}
LANE_DAILY_SCHEMA: dict[str, pl.DataType] = {
    "day": pl.Date(),
    "forced": pl.String(),
    "auto_pick": pl.String(),
    "overrides": pl.Int64(),
}
ALIAS_SCHEMA: dict[str, pl.DataType] = {
    "term": pl.String(),
    "term_misses": pl.Int64(),
    "rank": pl.Int64(),
    "alias": pl.String(),
    "distance": pl.Int64(),
    "capsules": pl.Int64(),
}
VOCABULARY_SCHEMA: dict[str, pl.DataType] = {
    "token": pl.String(),
    "capsules": pl.Int64(),
}

# A word, or a compound of words joined by - . ' ’ / (so "co-op" and "e.g" are tokens too).
_WORD = r"\w+"
_COMPOUND = r"\w+(?:[-.'’/]\w+)+"
# Lane pairs in the reference's order (4.8), so trends list them the same way every time.
_PAIR_ORDER = pl.DataFrame(
    [(forced, auto, i) for i, (forced, auto) in enumerate(LANE_PAIRS)],
    schema={"forced": pl.String, "auto_pick": pl.String, "_order": pl.Int64},
    orient="row",
)


@dataclass(frozen=True)
class AliasRules:
    """How close a vocabulary term must be to a missed term to be proposed as its alias.

    Attributes:
        max_distance: the largest Levenshtein distance proposed (default 2).
        short_term_length: terms of at most this many characters are "short" (default 4).
        short_max_distance: the largest distance proposed for a short term (default 1).
        per_term: at most this many proposals per missed term (default 3).

    Examples:
        >>> AliasRules().limit("retreival"), AliasRules().limit("gpu")
        (2, 1)
    """

    max_distance: int = 2
    short_term_length: int = 4
    short_max_distance: int = 1
    per_term: int = 3

    def __post_init__(self) -> None:
        for name in ("max_distance", "short_term_length", "short_max_distance", "per_term"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"AliasRules.{name} must be a non-negative integer, "
                                        f"got {value!r}")

    def limit(self, term: str) -> int:
        """The largest distance proposed for ``term``."""
        if len(term) <= self.short_term_length:
            return min(self.short_max_distance, self.max_distance)
        return self.max_distance


# ---- window ------------------------------------------------------------------------------

def _in_window(since: _dt.datetime | None, until: _dt.datetime | None) -> pl.Expr:
    expr = pl.lit(True)
    if since is not None:
        expr = expr & (pl.col("at") >= pl.lit(since).cast(_TS))
    if until is not None:
        expr = expr & (pl.col("at") < pl.lit(until).cast(_TS))
    return expr


# ---- vocabulary and aliases ----------------------------------------------------------------

def vocabulary(capsule_state: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """The store's own vocabulary: folded tokens of live capsule content.

    Content is split into words (``\\w+``) and compounds of words joined by ``-``, ``.``,
    ``'``, ``’`` or ``/``; each token is folded exactly like a miss term
    (:func:`memframe.text.fold_expr`) and kept when it holds a letter or a digit.

    Args:
        capsule_state: ``store.capsule_state()`` (needs ``id``, ``status``, ``content``).

    Returns:
        ``token``, ``capsules`` (live capsules whose content holds the token), sorted by
        token.

    Examples:
        >>> import polars as pl
        >>> state = pl.DataFrame({"id": ["cap-1", "cap-2", "cap-3"],
        ...                       "status": ["live", "live", "tombstoned"],
        ...                       "content": ["Retrieval, Café co-op", "retrieval", "gone"]})
        >>> vocabulary(state).rows()
        [('cafe', 1), ('co', 1), ('co-op', 1), ('op', 1), ('retrieval', 2)]
    """
    lazy = capsule_state.lazy()
    live = lazy.filter((pl.col("status") == "live") & pl.col("content").is_not_null())
    words = live.select(
        "id",
        pl.concat_list(
            pl.col("content").str.extract_all(_WORD),
            pl.col("content").str.extract_all(_COMPOUND),
        ).alias("token"),
    )
    return (
        words.explode("token")
        .filter(pl.col("token").is_not_null())
        .with_columns(fold_expr(pl.col("token")).alias("token"))
        .filter(pl.col("token").str.contains(r"[\p{L}\p{N}]"))
        .group_by("token")
        .agg(pl.col("id").n_unique().cast(pl.Int64).alias("capsules"))
        .sort("token")
        .collect()
        .cast(VOCABULARY_SCHEMA)  # type: ignore[arg-type]
    )


def alias_proposals(
    terms: pl.DataFrame,
    vocab: pl.DataFrame,
    rules: AliasRules | None = None,
) -> pl.DataFrame:
    """The closest vocabulary terms of each missed term the vocabulary lacks.

    Candidates are vocabulary tokens within ``rules.limit(term)`` Levenshtein edits
    (computed with ``rapidfuzz``), ordered by (distance, most live capsules first,
    token) and capped at ``rules.per_term``.

    Args:
        terms: ``term`` and ``misses`` of the missed terms.
        vocab: ``token`` and ``capsules``, as :func:`vocabulary` returns.
        rules: distance limits and the per-term cap (default :class:`AliasRules`).

    Returns:
        A frame of :data:`ALIAS_SCHEMA`: ``term``, ``term_misses``, ``rank`` (1-based),
        ``alias``, ``distance``, ``capsules``; sorted by (term_misses desc, term, rank).

    Examples:
        >>> import polars as pl
        >>> terms = pl.DataFrame({"term": ["retreival", "gpu"], "misses": [3, 1]})
        >>> vocab = pl.DataFrame({"token": ["retrieval", "retrievals", "gpus", "cpu"],
        ...                       "capsules": [5, 1, 2, 2]})
        >>> alias_proposals(terms, vocab).select("term", "alias", "distance").rows()
        [('retreival', 'retrieval', 2), ('gpu', 'cpu', 1), ('gpu', 'gpus', 1)]
    """
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    rules = rules or AliasRules()
    tokens = vocab.get_column("token").to_list()
    capsules = dict(zip(tokens, vocab.get_column("capsules").to_list(), strict=True))
    known = set(tokens)
    by_length: dict[int, list[str]] = {}
    for token in tokens:
        by_length.setdefault(len(token), []).append(token)

    rows: list[tuple[str, int, int, str, int, int]] = []
    for term, misses in terms.select("term", "misses").iter_rows():
        if term in known:
            continue
        limit = rules.limit(term)
        if limit == 0 or rules.per_term == 0:
            continue
        choices = [
            token
            for length in range(max(1, len(term) - limit), len(term) + limit + 1)
            for token in by_length.get(length, ())
        ]
        if not choices:
            continue
        found = process.extract(
            term, choices, scorer=Levenshtein.distance, score_cutoff=limit, limit=None
        )
        found.sort(key=lambda hit: (hit[1], -capsules[hit[0]], hit[0]))
        for rank, (alias, distance, _) in enumerate(found[: rules.per_term], start=1):
            rows.append((term, int(misses), rank, alias, int(distance), capsules[alias]))
    frame = pl.DataFrame(rows, schema=ALIAS_SCHEMA, orient="row")
    return frame.sort(["term_misses", "term", "rank"], descending=[True, False, False])


# ---- the frames --------------------------------------------------------------------------

def _term_table(misses: pl.LazyFrame, recurring_days: int) -> pl.LazyFrame:
    return (
        misses.group_by("term")
        .agg(
            pl.len().cast(pl.Int64).alias("misses"),
            (pl.col("outcome") == "abstain").sum().cast(pl.Int64).alias("abstain"),
            (pl.col("outcome") == "missing_evidence").sum().cast(pl.Int64)
            .alias("missing_evidence"),
            pl.col("at").min().alias("first_seen"),
            pl.col("at").max().alias("last_seen"),
            pl.col("at").dt.date().n_unique().cast(pl.Int64).alias("days"),
        )
        .with_columns((pl.col("days") >= recurring_days).alias("recurring"))
    )


def _day_range(frame: pl.DataFrame) -> pl.DataFrame:
    """Every day from the first to the last ``day`` of ``frame`` (empty when it is)."""
    if frame.is_empty():
        return pl.DataFrame(schema={"day": pl.Date()})
    first, last = frame.get_column("day").min(), frame.get_column("day").max()
    return pl.DataFrame({"day": pl.date_range(first, last, "1d", eager=True)})


def _daily(misses: pl.DataFrame) -> pl.DataFrame:
    dated = misses.with_columns(pl.col("at").dt.date().alias("day"))
    firsts = (
        dated.group_by("term").agg(pl.col("day").min())
        .group_by("day").agg(pl.len().cast(pl.Int64).alias("new_terms"))
    )
    per_day = dated.group_by("day").agg(
        pl.len().cast(pl.Int64).alias("misses"),
        (pl.col("outcome") == "abstain").sum().cast(pl.Int64).alias("abstain"),
        (pl.col("outcome") == "missing_evidence").sum().cast(pl.Int64).alias("missing_evidence"),
        pl.col("term").n_unique().cast(pl.Int64).alias("terms"),
    )
    return (
        _day_range(per_day)
        .join(per_day, on="day", how="left")
        .join(firsts, on="day", how="left")
        .fill_null(0)
        .select(list(DAILY_SCHEMA))
        .cast(DAILY_SCHEMA)  # type: ignore[arg-type]
        .sort("day")
    )


def _lane_daily(overrides: pl.DataFrame) -> pl.DataFrame:
    counted = (
        overrides.with_columns(pl.col("at").dt.date().alias("day"))
        .group_by("day", "forced", "auto_pick")
        .agg(pl.len().cast(pl.Int64).alias("overrides"))
    )
    pairs = counted.select("forced", "auto_pick").unique().join(
        _PAIR_ORDER, on=["forced", "auto_pick"], how="left"
    )
    grid = _day_range(counted).join(pairs, how="cross")
    return (
        grid.join(counted, on=["day", "forced", "auto_pick"], how="left")
        .with_columns(pl.col("overrides").fill_null(0))
        .sort("day", "_order", "forced", "auto_pick", nulls_last=True)
        .select(list(LANE_DAILY_SCHEMA))
        .cast(LANE_DAILY_SCHEMA)  # type: ignore[arg-type]
    )


# ---- the audit ---------------------------------------------------------------------------

def _records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: datetimes as RFC3339 text, dates as ISO dates."""
    exprs = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Datetime):
            exprs.append(rfc3339(pl.col(name)).alias(name))
        elif dtype == pl.Date:
            exprs.append(pl.col(name).dt.strftime("%Y-%m-%d").alias(name))
        else:
            exprs.append(pl.col(name))
    return frame.select(exprs).to_dicts() if exprs else []


@dataclass
class MissAudit:
    """The recall-miss audit of one store generation.

    Attributes:
        terms: one row per missed term: ``misses``, by outcome (``abstain``,
            ``missing_evidence``), ``first_seen``, ``last_seen``, ``days`` (distinct UTC
            days seen), ``recurring`` (missed on at least ``recurring_days`` days),
            ``in_vocabulary`` (live capsule content holds the term) and ``alias`` (the
            best alias proposal, if any); sorted by misses desc, then term.
        daily: one row per UTC day from the first to the last miss (zeros included):
            ``misses``, ``abstain``, ``missing_evidence``, ``terms`` (distinct),
            ``new_terms`` (terms first missed that day).
        lane_daily: lane overrides per UTC day and (``forced``, ``auto_pick``) pair, for
            every day of the overrides' span and every pair seen (zeros included).
        aliases: alias proposals: ``term``, ``term_misses``, ``rank``, ``alias``,
            ``distance``, ``capsules`` (live capsules containing the alias).
        generation: the store generation audited.
        since: the window's inclusive lower bound, or None.
        until: the window's exclusive upper bound, or None.
        vocabulary_size: distinct folded tokens of live capsule content.
        rules: the alias distance rules used.
        recurring_days: how many distinct days make a term recurring.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> clock = lambda: dt.datetime(2026, 7, 23, 12, tzinfo=dt.UTC)
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=clock)
        >>> _ = store.ingest({"content": "notes on retrieval", "source": "note", "anchor": "a"})
        >>> _ = store.record_miss(["Retreival"], "abstain")
        >>> audit = recall_misses(store)
        >>> audit.terms.select("term", "misses", "alias").rows()
        [('retreival', 1, 'retrieval')]
        >>> print(audit.to_text().splitlines()[0])
        recall-miss audit, generation 2: 1 miss of 1 term on 1 day
    """

    terms: pl.DataFrame
    daily: pl.DataFrame
    lane_daily: pl.DataFrame
    aliases: pl.DataFrame
    generation: int
    since: _dt.datetime | None = None
    until: _dt.datetime | None = None
    vocabulary_size: int = 0
    rules: AliasRules = field(default_factory=AliasRules)
    recurring_days: int = 2

    # -- summaries -------------------------------------------------------------------------
    @property
    def frames(self) -> dict[str, pl.DataFrame]:
        """Every frame of the audit by name (``terms``, ``daily``, ``lane_daily``,
        ``aliases``), for notebooks."""
        return {"terms": self.terms, "daily": self.daily, "lane_daily": self.lane_daily,
                "aliases": self.aliases}

    @property
    def totals(self) -> dict[str, int]:
        """Headline numbers: misses, by outcome, terms, recurring terms, terms outside
        the vocabulary, terms with a proposal, days with a miss, lane overrides."""
        t = self.terms
        return {
            "misses": int(t.get_column("misses").sum()),
            "abstain": int(t.get_column("abstain").sum()),
            "missing_evidence": int(t.get_column("missing_evidence").sum()),
            "terms": t.height,
            "recurring_terms": int(t.get_column("recurring").sum()),
            "unknown_terms": int((~t.get_column("in_vocabulary")).sum()),
            "terms_with_alias": int(t.get_column("alias").is_not_null().sum()),
            "days_with_misses": int((self.daily.get_column("misses") > 0).sum()),
            "lane_overrides": int(self.lane_daily.get_column("overrides").sum()),
        }

    def lane_totals(self) -> pl.DataFrame:
        """Lane overrides per (forced, auto_pick) pair over the whole window."""
        return (
            self.lane_daily.group_by("forced", "auto_pick", maintain_order=True)
            .agg(pl.col("overrides").sum())
        )

    # -- renderings --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The audit as plain JSON-ready data (insertion-ordered keys)."""
        return {
            "audit": "recall_misses",
            "generation": self.generation,
            "window": {
                "since": rfc3339_text(self.since) if self.since else None,
                "until": rfc3339_text(self.until) if self.until else None,
            },
            "rules": {
                "max_distance": self.rules.max_distance,
                "short_term_length": self.rules.short_term_length,
                "short_max_distance": self.rules.short_max_distance,
                "per_term": self.rules.per_term,
                "recurring_days": self.recurring_days,
            },
            "vocabulary_size": self.vocabulary_size,
            "totals": self.totals,
            "terms": _records(self.terms),
            "daily": _records(self.daily),
            "lane_daily": _records(self.lane_daily),
            "aliases": _records(self.aliases),
        }

    def to_json(self) -> str:
        """Deterministic JSON text (same generation and window -> same bytes).

        Examples:
            >>> import os, tempfile
            >>> import memframe as mf
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> recall_misses(store).to_json()[:40]
            '{"audit":"recall_misses","generation":0,'
        """
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    def to_text(self, limit: int = 20) -> str:
        """A plain-text report for a terminal (control characters made visible)."""
        from memframe._render import audit_text  # the leaf renderer: frames and values in

        return audit_text(**self._render_values(), recurring_days=self.recurring_days,
                          per_term=self.rules.per_term, limit=limit)

    def to_html(self, limit: int = 50) -> str:
        """One self-contained HTML page: tables and inline SVG charts, no script, no
        network at view time; every stored text escaped."""
        from memframe._render import audit_html

        return audit_html(**self._render_values(), vocabulary_size=self.vocabulary_size,
                          limit=limit, as_page=True)

    def _repr_html_(self) -> str:
        from memframe._render import audit_html

        return audit_html(**self._render_values(), vocabulary_size=self.vocabulary_size,
                          limit=20, as_page=False)

    def _render_values(self) -> dict[str, Any]:
        from memframe._render import audit_summary, audit_window

        return {"summary": audit_summary(self.generation, self.totals),
                "window": audit_window(self.since, self.until), "totals": self.totals,
                "terms": self.terms, "aliases": self.aliases, "daily": self.daily,
                "lane_daily": self.lane_daily}

    def __repr__(self) -> str:
        t = self.totals
        return (f"<MissAudit generation={self.generation} misses={t['misses']} "
                f"terms={t['terms']} recurring={t['recurring_terms']} "
                f"aliases={self.aliases.height}>")


def recall_misses(
    store: Any,
    since: _dt.datetime | _dt.date | str | None = None,
    until: _dt.datetime | _dt.date | str | None = None,
    *,
    rules: AliasRules | None = None,
    recurring_days: int = 2,
) -> MissAudit:
    """Audit the recall misses of a store (or a frozen view) at one pinned generation.

    Args:
        store: a :class:`memframe.Store` or a view (``store.at(g)``, ``store.as_of(t)``).
        since: keep misses and lane overrides at or after this instant (a date means its
            midnight UTC; ISO 8601 text is accepted).
        until: keep those strictly before this instant.
        rules: alias distance rules (default :class:`AliasRules`).
        recurring_days: distinct UTC days after which a term is flagged recurring.

    Returns:
        A :class:`MissAudit`. The vocabulary behind alias proposals is the live capsule
        content of the whole generation, whatever the window.

    Raises:
        InvalidInputError: an unreadable bound, ``since`` after ``until``, or a
            ``recurring_days`` below 1.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> days = iter(dt.datetime(2026, 7, d, tzinfo=dt.UTC) for d in range(1, 30))
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"),
        ...                         clock=lambda: next(days))
        >>> _ = store.ingest({"content": "the retrieval lane", "source": "note", "anchor": "a"})
        >>> for outcome in ("abstain", "missing_evidence"):
        ...     _ = store.record_miss(["retreival", "lane"], outcome)
        >>> audit = recall_misses(store)
        >>> audit.terms.select("term", "misses", "days", "recurring", "in_vocabulary").rows()
        [('lane', 2, 2, True, True), ('retreival', 2, 2, True, False)]
        >>> audit.aliases.select("term", "alias", "distance", "capsules").rows()
        [('retreival', 'retrieval', 2, 1)]
        >>> recall_misses(store, since="2026-07-03").totals["misses"]
        2
    """
    since_at = parse_instant(since, "since")
    until_at = parse_instant(until, "until")
    if since_at is not None and until_at is not None and since_at > until_at:
        raise InvalidInputError(
            f"since ({rfc3339_text(since_at)}) is after until ({rfc3339_text(until_at)}); "
            f"the window is [since, until)"
        )
    if isinstance(recurring_days, bool) or not isinstance(recurring_days, int) \
            or recurring_days < 1:
        raise InvalidInputError(f"recurring_days must be a positive integer, "
                                f"got {recurring_days!r}")
    rules = rules or AliasRules()
    view = store.pinned()
    window = _in_window(since_at, until_at)

    misses = (
        view.table("recall_misses")
        .filter(window & pl.col("outcome").is_in(list(MISS_OUTCOMES)))
        .select("seq", "at", "term", "outcome")
        .collect()
    )
    overrides = (
        view.table("lane_overrides").filter(window).select("at", "forced", "auto_pick").collect()
    )
    vocab = vocabulary(view.capsule_state())

    terms = (
        _term_table(misses.lazy(), recurring_days)
        .with_columns(pl.col("term").is_in(vocab.get_column("token").implode())
                      .alias("in_vocabulary"))
        .sort(["misses", "term"], descending=[True, False])
        .collect()
    )
    aliases = alias_proposals(terms, vocab, rules)
    best = aliases.filter(pl.col("rank") == 1).select("term", pl.col("alias"))
    terms = (
        terms.join(best, on="term", how="left", maintain_order="left")
        .select(list(TERM_SCHEMA))
        .cast(TERM_SCHEMA)  # type: ignore[arg-type]
    )
    return MissAudit(
        terms=terms,
        daily=_daily(misses),
        lane_daily=_lane_daily(overrides),
        aliases=aliases,
        generation=view.generation,
        since=since_at,
        until=until_at,
        vocabulary_size=vocab.height,
        rules=rules,
        recurring_days=recurring_days,
    )
