"""The recall-miss audit: what the agent looked for and did not find.

Everything is computed from one pinned generation of the store:

* ``recall_misses`` rows (reference 4.7: one folded term per row, outcome ``abstain`` or
  ``missing_evidence``) become a per-term table and a daily trend;
* ``lane_overrides`` rows (reference 4.8) become a daily trend per (forced, auto_pick) pair;
* the content of the **live** capsules, tokenised and folded exactly like miss terms, is
  the store's vocabulary, without the tokens that name or number things rather than say
  them (UUIDs, hashes, numbers, ``cap-12``, ``sess-3``: see :func:`id_like`);
* every missed word the vocabulary lacks gets its closest vocabulary words as **alias
  proposals**: optimal string alignment distance (an adjacent transposition is one edit),
  ranked so that frequent live words come first, each with its evidence (distance, live
  capsules, misses explained).

The candidate search is batched: deletion variants of both sides (the first
:data:`PREFIX` characters, up to the distance limit) are joined in Polars, and only the
pairs that share a variant are measured, in parallel. All frames are Polars DataFrames in a
deterministic order; :class:`MissAudit` renders them as JSON (deterministic bytes), plain
text and self-contained HTML.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe import budget
from memframe._scalars import as_date
from memframe.audit.state_ranges import capsule_state_ranges
from memframe.errors import InvalidInputError
from memframe.frames import json_records
from memframe.schema import LANE_PAIRS, MISS_OUTCOMES, TIMESTAMP
from memframe.text import (
    INSTANT_MAX,
    INSTANT_MIN,
    fold_expr,
    parse_instant,
    rfc3339_text,
)

if TYPE_CHECKING:  # pragma: no cover
    from memframe.audit.score import AliasScore

__all__ = [
    "recall_misses",
    "MissAudit",
    "AliasRules",
    "vocabulary",
    "alias_proposals",
    "id_like",
    "TERM_SCHEMA",
    "DAILY_SCHEMA",
    "LANE_DAILY_SCHEMA",
    "ALIAS_SCHEMA",
    "VOCABULARY_SCHEMA",
    "PREFIX",
    "LIFECYCLE_SCHEMA",
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
    "id_like": pl.Boolean(),
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
    "misses_explained": pl.Int64(),
}
VOCABULARY_SCHEMA: dict[str, pl.DataType] = {
    "token": pl.String(),
    "capsules": pl.Int64(),
}

# A word, or a compound of words joined by - . ' ’ / (so "co-op" and "e.g" are tokens too).
# Tokens that start with a digit are id-like (see id_like) and never extracted: the
# serial numbers, hashes and measures of a big store would otherwise be most of its
# distinct tokens.
_WORD = r"\b[^\W\d]\w*"
_COMPOUND = r"\b[^\W\d]\w*(?:[-.'’/]\w+)+"
# UUIDs are blanked out of (folded) content before tokenising, so their fragments
# ("8afe", "cafe") never become words.
_UUID = r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
# Live content is tokenised in at most two slices per thread, of at least this many rows.
_SLICE_ROWS = 25_000
#: How many leading characters of a term and of a vocabulary word the candidate index
#: takes deletion variants of (the search stays exact; longer words are measured whole).
PREFIX = 7
# Lane pairs in the reference's order (4.8), so trends list them the same way every time.
_PAIR_ORDER = pl.DataFrame(
    [(forced, auto, i) for i, (forced, auto) in enumerate(LANE_PAIRS)],
    schema={"forced": pl.String, "auto_pick": pl.String, "_order": pl.Int64},
    orient="row",
)


@dataclass(frozen=True)
class AliasRules:
    """How close a vocabulary word must be to a missed term to be proposed as its alias,
    and how proposals are ranked.

    Distances are optimal string alignment distances: insertions, deletions,
    substitutions and adjacent transpositions each count one edit (``audti`` is one edit
    from ``audit``, two from ``auth``).

    Proposals of a term are ranked by ``distance - log(capsules) / log(frequency_per_edit)``
    (lowest first), then distance, then live capsules (most first), then alphabetically:
    at equal distance the word more live capsules hold comes first, and a word one edit
    further away only comes first when ``frequency_per_edit`` times more live capsules
    hold it.

    Attributes:
        max_distance: the largest distance proposed (default 2).
        short_term_length: terms of at most this many characters are "short" (default 4).
        short_max_distance: the largest distance proposed for a short term (default 1).
        per_term: at most this many proposals per missed term (default 3).
        frequency_per_edit: how many times more live capsules make up for one more edit
            (default 1000; at least 2).

    Examples:
        >>> AliasRules().limit("retreival"), AliasRules().limit("gpu")
        (2, 1)
    """

    max_distance: int = 2
    short_term_length: int = 4
    short_max_distance: int = 1
    per_term: int = 3
    frequency_per_edit: int = 1000

    def __post_init__(self) -> None:
        for name in ("max_distance", "short_term_length", "short_max_distance", "per_term",
                     "frequency_per_edit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"AliasRules.{name} must be a non-negative integer, "
                                        f"got {value!r}")
        if self.frequency_per_edit < 2:
            raise InvalidInputError(f"AliasRules.frequency_per_edit must be at least 2, got "
                                    f"{self.frequency_per_edit!r}")

    def limit(self, term: str) -> int:
        """The largest distance proposed for ``term``."""
        if len(term) <= self.short_term_length:
            return min(self.short_max_distance, self.max_distance)
        return self.max_distance

    def limit_expr(self, term: pl.Expr) -> pl.Expr:
        """:meth:`limit` as a Polars expression over a column of terms.

        Examples:
            >>> pl.DataFrame({"t": ["gpu", "retreival"]}).select(
            ...     AliasRules().limit_expr(pl.col("t")))["literal"].to_list()
            [1, 2]
        """
        return (pl.when(term.str.len_chars() <= self.short_term_length)
                .then(pl.lit(min(self.short_max_distance, self.max_distance)))
                .otherwise(pl.lit(self.max_distance)).cast(pl.Int64))


# ---- window ------------------------------------------------------------------------------

def folded_receipt_terms(receipts: pl.LazyFrame) -> pl.LazyFrame:
    """One row per (receipt, folded term): the receipt's terms folded as miss terms are
    (reference 4.7), those without an alphanumeric dropped, repeats within a receipt once.

    Examples:
        >>> import polars as pl
        >>> r = pl.LazyFrame({"id": ["rcpt-1"], "terms": [["Café", "café", "--"]]})
        >>> folded_receipt_terms(r).collect()["term"].to_list()
        ['cafe']
    """
    return (receipts.explode("terms")
            .with_columns(fold_expr(pl.col("terms")).alias("term"))
            .drop("terms")
            .filter(pl.col("term").str.contains(r"[[:alnum:]]"))
            .unique(["id", "term"], maintain_order=True))


def _in_window(since: _dt.datetime | None, until: _dt.datetime | None) -> pl.Expr:
    """The window [since, until) over ``at``. A bound beyond the instants a store can hold
    (`INSTANT_MIN`..`INSTANT_MAX`, nanoseconds since 1970 in an int64) is no bound on that
    side, or an empty window when it lies past the other side of that range."""
    expr = pl.lit(True)
    if since is not None and since > INSTANT_MAX:
        return pl.lit(False)
    if until is not None and until < INSTANT_MIN:
        return pl.lit(False)
    if since is not None and since >= INSTANT_MIN:
        expr = expr & (pl.col("at") >= pl.lit(since).cast(_TS))
    if until is not None and until <= INSTANT_MAX:
        expr = expr & (pl.col("at") < pl.lit(until).cast(_TS))
    return expr


# ---- progress ----------------------------------------------------------------------------

class _Steps:
    """A progress bar over the audit's steps, on stderr and only when it is a terminal."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.bar: Any = None
        if enabled and sys.stderr.isatty():
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="audit", unit="step", leave=False,
                            file=sys.stderr)

    def step(self, what: str) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(what, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---- vocabulary ----------------------------------------------------------------------------

def id_like(token: pl.Expr) -> pl.Expr:
    """True for a folded token that names or numbers something rather than says it.

    Such tokens are left out of the vocabulary and get no alias proposal: no letter at
    all (numbers, dates), a leading digit (``10x``, ``250ms``), hexadecimal of 4+
    characters with a digit (commit hashes, UUID pieces), a purely numeric segment in a
    compound or after an underscore (``cap-12``, ``sess-3``, ``node_7``, ``v1.2.3``), and
    long runs of 16+ characters with 4+ digits and no underscore (keys, encoded blobs).

    Examples:
        >>> import polars as pl
        >>> tokens = ["cap-12", "sess-3", "3f9a2c1", "8afe", "cafe", "250ms", "2026",
        ...           "retrieval_cache", "schema_v2", "e2e", "co-op", "node_7"]
        >>> pl.DataFrame({"t": tokens}).filter(id_like(pl.col("t")))["t"].to_list()
        ['cap-12', 'sess-3', '3f9a2c1', '8afe', '250ms', '2026', 'node_7']
    """
    return (
        ~token.str.contains(r"\p{L}")
        | token.str.contains(r"^\p{N}")
        | (token.str.contains(r"^[0-9a-f]+(?:[-.][0-9a-f]+)*$")
           & token.str.contains(r"[0-9]") & (token.str.len_chars() >= 4))
        | token.str.contains(r"(?:^|[-_.'’/])[0-9]+(?:[-.'’/]|$)")
        | ((token.str.len_chars() >= 16) & (token.str.count_matches(r"[0-9]") >= 4)
           & ~token.str.contains("_", literal=True))
    )


def _tokenise(content: pl.LazyFrame) -> pl.LazyFrame:
    """(token, capsules) of one slice of live content: folded, UUIDs blanked, each token
    counted once per capsule."""
    c = pl.col("content")
    ascii_only = c.str.len_bytes() == c.str.len_chars()
    folded = pl.concat([  # only text with non-ASCII characters needs the diacritic fold
        content.filter(ascii_only).select(c.str.to_lowercase()),
        content.filter(~ascii_only).select(fold_expr(c)),
    ])
    return (
        folded.select(c.str.replace_all(_UUID, " "))
        .select(pl.concat_list(c.str.extract_all(_WORD), c.str.extract_all(_COMPOUND))
                .list.unique().alias("token"))
        .explode("token")
        .drop_nulls("token")
        .group_by("token")
        .agg(pl.len().cast(pl.Int64).alias("capsules"))
    )


def _token_counts(capsule_state: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """Every folded token of live content with the number of live capsules holding it
    (id-like tokens included), tokenised in parallel slices."""
    live = (
        capsule_state.lazy()
        .filter((pl.col("status") == "live") & pl.col("content").is_not_null())
        .select("content")
        .collect()
    )
    if live.is_empty():
        return pl.DataFrame(schema=VOCABULARY_SCHEMA)
    slices = max(1, min(2 * pl.thread_pool_size(), live.height // _SLICE_ROWS))
    step = -(-live.height // slices)
    parts = pl.collect_all([_tokenise(live.slice(i, step).lazy())
                            for i in range(0, live.height, step)])
    counts = pl.concat(parts)
    if len(parts) > 1:
        counts = counts.group_by("token").agg(pl.col("capsules").sum())
    return counts


def vocabulary(capsule_state: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """The store's own vocabulary: folded words of live capsule content.

    Content is folded like a miss term (:func:`memframe.text.fold_expr`), UUIDs are blanked
    out, and the rest is split into words (``\\w+``) and compounds of words joined by
    ``-``, ``.``, ``'``, ``’`` or ``/``. Tokens that name or number things rather than say
    them (:func:`id_like`: hashes, numbers, ``cap-12``, ``sess-3``) are left out; those
    starting with a digit are never even extracted.

    Args:
        capsule_state: ``store.capsule_state()`` (needs ``status`` and ``content``).

    Returns:
        ``token``, ``capsules`` (live capsules whose content holds the token), sorted by
        token.

    Examples:
        >>> import polars as pl
        >>> state = pl.DataFrame({"id": ["cap-1", "cap-2", "cap-3"],
        ...                       "status": ["live", "live", "tombstoned"],
        ...                       "content": ["Retrieval, Café co-op", "retrieval cap-12",
        ...                                   "gone"]})
        >>> vocabulary(state).rows()
        [('cafe', 1), ('cap', 1), ('co', 1), ('co-op', 1), ('op', 1), ('retrieval', 2)]
    """
    return _sorted_vocabulary(_add_counts(pl.DataFrame(schema=VOCABULARY_SCHEMA),
                                          capsule_state))


def _add_counts(counts: pl.DataFrame, state: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    found = _token_counts(state).filter(~id_like(pl.col("token")))
    if counts.is_empty():
        return found
    return (pl.concat([counts, found.cast(counts.schema)])
            .group_by("token").agg(pl.col("capsules").sum()))


def _sorted_vocabulary(counts: pl.DataFrame) -> pl.DataFrame:
    return counts.sort("token").select(list(VOCABULARY_SCHEMA)).cast(
        VOCABULARY_SCHEMA)  # type: ignore[arg-type]


# ---- alias proposals -----------------------------------------------------------------------

def _deletion_variants(frame: pl.DataFrame, depth: pl.Expr | int) -> pl.DataFrame:
    """``(i, v)``: every string obtained from the first :data:`PREFIX` characters of
    ``text`` by deleting at most ``depth`` characters (per row), without repeats."""
    base = frame.select("i", pl.col("text").str.slice(0, PREFIX).alias("v"),
                        (depth if isinstance(depth, pl.Expr) else pl.lit(depth))
                        .alias("depth"))
    levels = [base.select("i", "v")]
    current = base
    deepest = int(base.get_column("depth").max() or 0)  # type: ignore[arg-type]
    for level in range(1, deepest + 1):
        current = (
            current.filter(pl.col("depth") >= level)
            .with_columns(pl.int_ranges(0, pl.col("v").str.len_chars()).alias("at"))
            .explode("at")
            .drop_nulls("at")
            .select("i", (pl.col("v").str.slice(0, pl.col("at"))
                          + pl.col("v").str.slice(pl.col("at") + 1)).alias("v"), "depth")
            .unique(["i", "v"])
        )
        levels.append(current.select("i", "v"))
    return pl.concat(levels).unique(["i", "v"])


def _candidates(queries: pl.DataFrame, words: pl.DataFrame, max_limit: int) -> pl.DataFrame:
    """``(qi, wi, distance)`` for every query and word within the query's ``limit``.

    ``queries`` has ``i``, ``text``, ``limit``; ``words`` has ``i``, ``text``. Exact: two
    strings within ``k`` edits (insertions, deletions, substitutions, adjacent
    transpositions) share a string reachable from each one's first :data:`PREFIX`
    characters by at most ``k`` deletions, so joining the deletion variants finds every
    pair; each pair found is then measured whole.
    """
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    length = pl.col("text").str.len_chars().cast(pl.Int64)
    lengths = queries.select((length - pl.col("limit")).min().alias("lo"),
                             (length + pl.col("limit")).max().alias("hi"))
    lo, hi = lengths.row(0)
    words = words.filter(pl.col("text").str.len_chars().is_between(lo, hi))
    if words.is_empty():
        return pl.DataFrame(schema={"qi": pl.Int64, "wi": pl.Int64, "distance": pl.Int64})
    # the join key is (variant, word length): a query only meets words whose length is
    # within its limit, so long identifiers sharing a prefix never become pairs
    query_keys = (
        _deletion_variants(queries, pl.col("limit"))
        .join(queries.select("i", (length - pl.col("limit")).alias("lo"),
                             (length + pl.col("limit")).alias("hi")), on="i")
        .with_columns(pl.int_ranges("lo", pl.col("hi") + 1).alias("n"))
        .explode("n")
        .select("i", "v", pl.col("n").cast(pl.Int64))
    )
    word_keys = (
        _deletion_variants(words, max_limit)
        .join(words.select("i", length.alias("n")), on="i")
    )
    pairs = (
        query_keys.join(word_keys, on=["v", "n"], suffix="_w")
        .select(pl.col("i").alias("qi"), pl.col("i_w").alias("wi"))
        .unique()
        .join(queries.select(pl.col("i").alias("qi"), pl.col("text").alias("q"), "limit"),
              on="qi")
        .join(words.select(pl.col("i").alias("wi"), pl.col("text").alias("w")), on="wi")
    )
    if pairs.is_empty():
        return pl.DataFrame(schema={"qi": pl.Int64, "wi": pl.Int64, "distance": pl.Int64})
    distance = process.cpdist(pairs.get_column("q").to_list(), pairs.get_column("w").to_list(),
                              scorer=OSA.distance, score_cutoff=max_limit, workers=-1)
    return (
        pairs.with_columns(pl.Series("distance", distance).cast(pl.Int64))
        .filter(pl.col("distance") <= pl.col("limit"))
        .select(pl.col("qi").cast(pl.Int64), pl.col("wi").cast(pl.Int64), "distance")
    )


def alias_proposals(
    terms: pl.DataFrame,
    vocab: pl.DataFrame,
    rules: AliasRules | None = None,
) -> pl.DataFrame:
    """The closest vocabulary words of each missed term the vocabulary lacks.

    Candidates are vocabulary words within ``rules.limit(term)`` edits (optimal string
    alignment: an adjacent transposition is one edit), ranked as :class:`AliasRules`
    says (frequent live words first) and capped at ``rules.per_term``. Id-like terms
    (:func:`id_like`: hashes, numbers, ``cap-12``) get no proposal.

    Args:
        terms: ``term`` and ``misses`` of the missed terms.
        vocab: ``token`` and ``capsules``, as :func:`vocabulary` returns.
        rules: distance limits, ranking and the per-term cap (default :class:`AliasRules`).

    Returns:
        A frame of :data:`ALIAS_SCHEMA`: ``term``, ``term_misses``, ``rank`` (1-based),
        ``alias``, and the evidence: ``distance``, ``capsules`` (live capsules holding the
        alias) and ``misses_explained`` (misses of every term the alias is proposed for);
        sorted by (term_misses desc, term, rank).

    Examples:
        >>> import polars as pl
        >>> terms = pl.DataFrame({"term": ["audti", "retreival", "gpu"], "misses": [4, 3, 1]})
        >>> vocab = pl.DataFrame({"token": ["audit", "auth", "retrieval", "gpus", "cpu"],
        ...                       "capsules": [5, 9, 1, 2, 2]})
        >>> alias_proposals(terms, vocab).select("term", "alias", "distance").rows()
        [('audti', 'audit', 1), ('audti', 'auth', 2), ('retreival', 'retrieval', 1), ('gpu', 'cpu', 1), ('gpu', 'gpus', 1)]
    """
    rules = rules or AliasRules()
    empty = pl.DataFrame(schema=ALIAS_SCHEMA)
    if rules.per_term == 0 or rules.max_distance == 0 or terms.is_empty() or vocab.is_empty():
        return empty
    queries = (
        terms.select(pl.col("term").alias("text"), pl.col("misses").cast(pl.Int64))
        .filter(~pl.col("text").is_in(vocab.get_column("token").implode())
                & ~id_like(pl.col("text")))
        .with_columns(rules.limit_expr(pl.col("text")).alias("limit"))
        .filter(pl.col("limit") > 0)
        .with_row_index("i")
    )
    if queries.is_empty():
        return empty
    words = vocab.select(pl.col("token").alias("text"), pl.col("capsules").cast(pl.Int64)) \
        .with_row_index("i")
    found = _candidates(queries.select("i", "text", "limit"), words.select("i", "text"),
                        rules.max_distance)
    if found.is_empty():
        return empty
    per_edit = math.log(rules.frequency_per_edit)
    ranked = (
        found.join(queries.select(pl.col("i").cast(pl.Int64).alias("qi"),
                                  pl.col("text").alias("term"),
                                  pl.col("misses").alias("term_misses")), on="qi")
        .join(words.select(pl.col("i").cast(pl.Int64).alias("wi"),
                           pl.col("text").alias("alias"), "capsules"), on="wi")
        .with_columns((pl.col("distance")
                       - pl.col("capsules").cast(pl.Float64).log() / per_edit).alias("score"))
        .sort(["term", "score", "distance", "capsules", "alias"],
              descending=[False, False, False, True, False])
        .with_columns(pl.int_range(1, pl.len() + 1).over("term").cast(pl.Int64).alias("rank"))
        .filter(pl.col("rank") <= rules.per_term)
    )
    return (
        ranked.with_columns(pl.col("term_misses").sum().over("alias").cast(pl.Int64)
                            .alias("misses_explained"))
        .select(list(ALIAS_SCHEMA))
        .cast(ALIAS_SCHEMA)  # type: ignore[arg-type]
        .sort(["term_misses", "term", "rank"], descending=[True, False, False])
    )


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
    return pl.DataFrame({"day": pl.date_range(as_date(first), as_date(last), "1d", eager=True)})


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


# ---- the life of a miss ------------------------------------------------------------------

LIFECYCLE_SCHEMA: dict[str, pl.DataType] = {
    "term": pl.String(), "first_miss": _TS, "last_miss": _TS, "repeats": pl.Int64(),
    "resolved_at": _TS, "resolved_by": pl.String(), "resolution": pl.String(),
    "time_to_resolution": pl.Duration("ns"),
}


def _read_content(ranges: Iterable[pl.DataFrame], terms: pl.DataFrame
                  ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """One pass over the content of every capsule (``capsule_state_ranges`` rows: id,
    status, created_at, content), one range at a time: the vocabulary (`vocabulary`: of
    the live ones) and, per missed term, ``(term, id, created_at)`` of the first capsule
    created after its last miss whose folded words hold every word of it (`_lifecycle`)."""
    words = (terms.select("term", pl.col("term").str.split(" ").alias("word")).explode("word")
             .filter(pl.col("word") != "").unique())
    need = words.group_by("term").agg(pl.len().alias("need")).join(
        terms.select("term", pl.col("last_seen").alias("last_miss")), on="term")
    earliest = terms["first_seen"].min()
    counts = pl.DataFrame(schema=VOCABULARY_SCHEMA)
    found = [pl.DataFrame(schema={"term": pl.String, "id": pl.String, "created_at": TIMESTAMP})]
    for rows in ranges:
        counts = _add_counts(counts, rows)
        if terms.is_empty():
            continue
        after = rows.filter(pl.col("created_at") > earliest)
        # a slice at a time: a capsule's words, exploded, outnumber its rows many times
        found.extend(_answering(after.slice(i, _ANSWER_ROWS), words, need)
                     for i in range(0, after.height, _ANSWER_ROWS))
        found = [_first_answers(pl.concat(found))]  # held: one row per term at most
    return _sorted_vocabulary(counts), found[0]


def _first_answers(answers: pl.DataFrame) -> pl.DataFrame:
    """Per term, its first answering capsule: by ``created_at``, then id (as text, the
    order `_lifecycle` breaks ties in)."""
    return answers.sort("created_at", "id").group_by("term", maintain_order=True).first()


#: capsules matched against the missed terms at a time (`_answering`)
_ANSWER_ROWS = 100_000


def _answering(capsules: pl.DataFrame, words: pl.DataFrame, need: pl.DataFrame
               ) -> pl.DataFrame:
    """``(term, id, created_at)`` of ``capsules`` created after a term's last miss whose
    folded words hold all ``need`` of its ``words``: the first such capsule per term."""
    text = capsules.lazy().select("id", "created_at", fold_expr(pl.col("content")).alias("text"))
    tokens = (text.select("id", "created_at", pl.concat_list(
        pl.col("text").str.extract_all(_WORD), pl.col("text").str.extract_all(_COMPOUND))
        .list.unique().alias("word")).explode("word").join(words.lazy(), on="word"))
    return (tokens.group_by("term", "id", "created_at").agg(pl.len().alias("have"))
            .join(need.lazy(), on="term").filter((pl.col("have") == pl.col("need"))
                                                 & (pl.col("created_at") > pl.col("last_miss")))
            .select("term", "id", "created_at").sort("created_at", "id")
            .group_by("term", maintain_order=True).first().collect())


def _lifecycle(view: Any, terms: pl.DataFrame, answering: pl.DataFrame) -> pl.DataFrame:
    """One row per missed term: first and last miss, repeats, and the first event strictly
    after the last miss that answers it: a receipt for the term that returned a capsule
    (``receipt``, by its id), a capsule created whose folded words hold every word of
    the term (``capsule``, by its id), or an alias taught for the term (``alias``, by the
    alias taught: the row of ``recall_aliases`` is the pair (term, alias), the engine's
    key, as aliases have no id). An alias with no alphanumeric character is no answer (the
    engine's recall skips it). On one instant, ``alias`` comes before ``capsule`` before
    ``receipt``. Still open: ``resolved_at`` null."""

    base = terms.select("term", pl.col("first_seen").alias("first_miss"),
                        pl.col("last_seen").alias("last_miss"),
                        pl.col("misses").alias("repeats"))
    if base.is_empty():
        return pl.DataFrame(schema=LIFECYCLE_SCHEMA)
    wanted = base.select("term", "last_miss").lazy()
    by_receipt = (folded_receipt_terms(
        view.table("recall_receipts").filter(pl.col("returned_ids").list.len() > 0)
        .select("id", "at", "terms"))
        .join(wanted, on="term").filter(pl.col("at") > pl.col("last_miss"))
        .select("term", "at", pl.col("id").alias("by"), pl.lit("receipt").alias("resolution")))
    by_capsule = answering.lazy().select(  # each term's first answer after its last miss
        "term", pl.col("created_at").alias("at"), pl.col("id").alias("by"),
        pl.lit("capsule").alias("resolution"))
    by_alias = (view.table("recall_aliases")
                .filter(pl.col("alias").str.contains(r"[[:alnum:]]"))
                .select(fold_expr(pl.col("term")).alias("term"), "at", pl.col("alias").alias("by"))
                .join(wanted, on="term").filter(pl.col("at") > pl.col("last_miss"))
                .select("term", "at", "by", pl.lit("alias").alias("resolution")))
    events = pl.concat([by_receipt, by_capsule, by_alias]).collect()
    first = (events.sort("at", "resolution", "by")
             .group_by("term", maintain_order=True).first()
             .rename({"at": "resolved_at", "by": "resolved_by"}))
    return (base.join(first, on="term", how="left", maintain_order="left")
            .with_columns((pl.col("resolved_at") - pl.col("first_miss"))
                          .alias("time_to_resolution"))
            .select(list(LIFECYCLE_SCHEMA)).cast(LIFECYCLE_SCHEMA)  # type: ignore[arg-type]
            .sort(["resolved_at", "repeats", "term"], descending=[False, True, False],
                  nulls_last=True))


# ---- the audit ---------------------------------------------------------------------------

@dataclass
class MissAudit:
    """The recall-miss audit of one store generation.

    Attributes:
        terms: one row per missed term: ``misses``, by outcome (``abstain``,
            ``missing_evidence``), ``first_seen``, ``last_seen``, ``days`` (distinct UTC
            days seen), ``recurring`` (missed on at least ``recurring_days`` days),
            ``in_vocabulary`` (the term is a word of live capsule content), ``alias`` (the
            best alias proposal, if any) and ``id_like`` (the term names or numbers
            something, see :func:`id_like`: it is never in the vocabulary and gets no
            alias); sorted by misses desc, then term.
        daily: one row per UTC day from the first to the last miss (zeros included):
            ``misses``, ``abstain``, ``missing_evidence``, ``terms`` (distinct),
            ``new_terms`` (terms first missed that day).
        lane_daily: lane overrides per UTC day and (``forced``, ``auto_pick``) pair, for
            every day of the overrides' span and every pair seen (zeros included).
        aliases: alias proposals: ``term``, ``term_misses``, ``rank``, ``alias`` and the
            evidence: ``distance`` (edits, a transposition counting one), ``capsules``
            (live capsules containing the alias), ``misses_explained`` (misses of every
            term the alias is proposed for).
        generation: the store generation audited.
        since: the window's inclusive lower bound, or None.
        until: the window's exclusive upper bound, or None.
        vocabulary_size: distinct folded words of live capsule content (id-like tokens
            left out).
        rules: the alias distance rules used.
        recurring_days: how many distinct days make a term recurring.
        lifecycle: the life of each missed term: ``first_miss``, ``last_miss``,
            ``repeats``, and what first answered it after its last miss (``resolved_at``,
            ``resolved_by``, ``resolution``: ``receipt`` by its id, ``capsule`` by its id,
            or ``alias`` by the alias taught for the term; null while open) and
            ``time_to_resolution`` (from the first miss).

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
    lifecycle: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=LIFECYCLE_SCHEMA))

    def open_misses(self) -> pl.DataFrame:
        """The missed terms nothing answered since their last miss, most repeated first."""
        return (self.lifecycle.filter(pl.col("resolved_at").is_null())
                .select("term", "repeats", "first_miss", "last_miss")
                .sort(["repeats", "term"], descending=[True, False]))

    def resolution_times(self) -> pl.DataFrame:
        """How long resolved misses stayed open (first miss to resolution): count per
        bucket (``< 1 hour``, ``< 1 day``, ``< 7 days``, ``< 30 days``, ``>= 30 days``)."""
        buckets = [("< 1 hour", 3_600), ("< 1 day", 86_400), ("< 7 days", 7 * 86_400),
                   ("< 30 days", 30 * 86_400)]
        secs = self.lifecycle["time_to_resolution"].drop_nulls().dt.total_seconds()
        rows, lower = [], -1
        for name, upper in buckets:
            rows.append((name, int(((secs > lower) & (secs < upper)).sum())))
            lower = upper - 1
        rows.append((">= 30 days", int((secs >= 30 * 86_400).sum())))
        return pl.DataFrame(rows, schema={"bucket": pl.String, "terms": pl.Int64},
                            orient="row")

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
        the vocabulary, terms with a proposal, days with a miss, lane overrides, id-like
        terms."""
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
            "id_like_terms": int(t.get_column("id_like").sum()),
        }

    def lane_totals(self) -> pl.DataFrame:
        """Lane overrides per (forced, auto_pick) pair over the whole window."""
        return (
            self.lane_daily.group_by("forced", "auto_pick", maintain_order=True)
            .agg(pl.col("overrides").sum())
        )

    def score(self, truth: pl.DataFrame) -> AliasScore:
        """Score the alias proposals against a ground truth of which term came from which
        word (``term``, ``word``, ``edit``; :func:`memframe.synth.miss_truth` returns
        one): see :func:`memframe.audit.score_aliases`.

        Examples:
            >>> import os, tempfile
            >>> from memframe.synth import miss_truth, synthesize
            >>> store = synthesize(os.path.join(tempfile.mkdtemp(), "s"), capsules=400,
            ...                    seed=3, noise=True)
            >>> score = recall_misses(store).score(miss_truth(3, capsules=400, noise=True))
            >>> score.precision_at_1 >= 0.9
            True
        """
        from memframe.audit.score import score_aliases

        return score_aliases(self.aliases, truth)

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
                "frequency_per_edit": self.rules.frequency_per_edit,
                "recurring_days": self.recurring_days,
            },
            "vocabulary_size": self.vocabulary_size,
            "totals": self.totals,
            "terms": json_records(self.terms),
            "daily": json_records(self.daily),
            "lane_daily": json_records(self.lane_daily),
            "aliases": json_records(self.aliases),
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
    progress: bool = True,
    memory_limit: str | int | None = None,
) -> MissAudit:
    """Audit the recall misses of a store (or a frozen view) at one pinned generation.

    Args:
        store: a :class:`memframe.Store` or a view (``store.at(g)``, ``store.as_of(t)``).
        since: keep misses and lane overrides at or after this instant (a date means its
            midnight UTC; ISO 8601 text is accepted).
        until: keep those strictly before this instant.
        rules: alias distance rules (default :class:`AliasRules`).
        recurring_days: distinct UTC days after which a term is flagged recurring.
        progress: show the audit's steps on stderr (only when stderr is a terminal).
        memory_limit: the most memory the vocabulary's read of every capsule may hold
            (e.g. ``"2GB"``; default: `memframe.memory_limit`, ``MEMFRAME_MEMORY_LIMIT``,
            else no limit): it reads the live content one range of capsules at a time.

    Returns:
        A :class:`MissAudit`. The vocabulary behind alias proposals is the live capsule
        content of the whole generation, whatever the window.

    Raises:
        InvalidInputError: an unreadable bound, ``since`` after ``until``, or a
            ``recurring_days`` below 1.
        MemoryBudgetError: ``memory_limit`` cannot hold the smallest range (raised
            before anything is read).

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
        [('retreival', 'retrieval', 1, 1)]
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
    with budget.memory_limit(memory_limit):
        return _audit(store.pinned(), since_at, until_at, rules, recurring_days, progress)


def _audit(view: Any, since_at: _dt.datetime | None, until_at: _dt.datetime | None,
           rules: AliasRules, recurring_days: int, progress: bool) -> MissAudit:
    ranges = capsule_state_ranges(view, ["id", "status", "created_at", "content"],
                                  pl.col("content").is_not_null())
    steps = _Steps(progress, 4)
    try:
        window = _in_window(since_at, until_at)
        misses, overrides = pl.collect_all([
            view.table("recall_misses")
            .filter(window & pl.col("outcome").is_in(list(MISS_OUTCOMES)))
            .select("seq", "at", "term", "outcome"),
            view.table("lane_overrides").filter(window).select("at", "forced", "auto_pick"),
        ])
        steps.step("misses read")
        counted = _term_table(misses.lazy(), recurring_days).collect()
        vocab, answering = _read_content(ranges, counted)
        steps.step(f"vocabulary: {vocab.height:,} words")
        terms = (
            counted.lazy()
            .with_columns(pl.col("term").is_in(vocab.get_column("token").implode())
                          .alias("in_vocabulary"),
                          id_like(pl.col("term")).alias("id_like"))
            .sort(["misses", "term"], descending=[True, False])
            .collect()
        )
        aliases = alias_proposals(terms, vocab, rules)
        steps.step(f"aliases: {aliases.height:,} proposals")
        best = aliases.filter(pl.col("rank") == 1).select("term", pl.col("alias"))
        terms = (
            terms.join(best, on="term", how="left", maintain_order="left")
            .select(list(TERM_SCHEMA))
            .cast(TERM_SCHEMA)  # type: ignore[arg-type]
        )
        audit = MissAudit(
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
            lifecycle=_lifecycle(view, terms, answering),
        )
        steps.step("trends")
        return audit
    finally:
        steps.close()
