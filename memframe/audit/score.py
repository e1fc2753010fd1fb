"""Alias proposals scored against a ground truth of which missed term came from which word.

A synthetic store knows, for every recall miss, whether it was a typo of a word the
capsules hold (and of which word), a correctly spelled word, or a word or identifier no
capsule holds (:func:`memframe.synth.miss_truth`). :func:`score_aliases` compares the
audit's proposals with that record, term by term:

* **precision@1**: of the missed terms that got a proposal, the share whose first proposal
  is the word the term came from (a proposal for a term that is no typo counts against);
* **recall@1**: of the typo terms, the share whose first proposal is their word;
* **recall**: of the typo terms, the share whose word is among their proposals.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import polars as pl

from memframe.errors import InvalidInputError

__all__ = ["AliasScore", "score_aliases", "TYPO_EDITS", "RecallScore", "score_recall"]

#: The ``edit`` values of typo rows in a ground truth (one edit from ``word``).
TYPO_EDITS: tuple[str, ...] = ("transpose", "delete", "substitute", "insert")


@dataclass(frozen=True)
class AliasScore:
    """How well alias proposals match a ground truth, counted over distinct terms.

    Attributes:
        typo_terms: distinct missed terms that are typos of a word.
        proposed_terms: distinct missed terms with at least one proposal.
        correct_at_1: proposed terms whose first proposal is their true word.
        found: typo terms whose true word is among their proposals.
        by_edit: per kind of term (``edit``: the typo edits, ``exact``, ``absent``):
            ``terms``, ``proposed``, ``correct_at_1``, ``found``.

    Examples:
        >>> s = AliasScore(typo_terms=10, proposed_terms=9, correct_at_1=9, found=9,
        ...                by_edit=pl.DataFrame())
        >>> s.precision_at_1, s.recall_at_1, s.recall
        (1.0, 0.9, 0.9)
    """

    typo_terms: int
    proposed_terms: int
    correct_at_1: int
    found: int
    by_edit: pl.DataFrame

    @property
    def precision_at_1(self) -> float:
        """Share of proposed terms whose first proposal is right (1.0 when none)."""
        return self.correct_at_1 / self.proposed_terms if self.proposed_terms else 1.0

    @property
    def recall_at_1(self) -> float:
        """Share of typo terms whose first proposal is their word (1.0 when none)."""
        return self.correct_at_1 / self.typo_terms if self.typo_terms else 1.0

    @property
    def recall(self) -> float:
        """Share of typo terms whose word is among their proposals (1.0 when none)."""
        return self.found / self.typo_terms if self.typo_terms else 1.0

    def to_dict(self) -> dict[str, float | int]:
        """The counts and the three rates (rounded to 4 places) as plain data."""
        return {
            "typo_terms": self.typo_terms, "proposed_terms": self.proposed_terms,
            "correct_at_1": self.correct_at_1, "found": self.found,
            "precision_at_1": round(self.precision_at_1, 4),
            "recall_at_1": round(self.recall_at_1, 4), "recall": round(self.recall, 4),
        }

    def __repr__(self) -> str:
        return (f"<AliasScore precision@1={self.precision_at_1:.3f} "
                f"recall@1={self.recall_at_1:.3f} recall={self.recall:.3f} "
                f"typo_terms={self.typo_terms} proposed_terms={self.proposed_terms}>")


def score_aliases(aliases: pl.DataFrame, truth: pl.DataFrame) -> AliasScore:
    """Score alias proposals against a ground truth.

    Args:
        aliases: the audit's proposals (``term``, ``rank``, ``alias``), as
            :attr:`memframe.audit.MissAudit.aliases` holds them.
        truth: one row per miss (or per term) with ``term``, ``word`` (the word the term
            came from, null when none) and ``edit`` (a :data:`TYPO_EDITS` value for a
            typo); :func:`memframe.synth.miss_truth` returns one. Terms are compared as
            stored (folded).

    Returns:
        An :class:`AliasScore` over distinct terms.

    Raises:
        InvalidInputError: a frame lacks a needed column, or the truth names two
            different words for one term.

    Examples:
        >>> import polars as pl
        >>> truth = pl.DataFrame({"term": ["retreival", "kafka", "audti"],
        ...                       "word": ["retrieval", None, "audit"],
        ...                       "edit": ["transpose", "absent", "transpose"]})
        >>> aliases = pl.DataFrame({"term": ["retreival", "kafka", "audti", "audti"],
        ...                         "rank": [1, 1, 1, 2],
        ...                         "alias": ["retrieval", "afka", "auth", "audit"]})
        >>> s = score_aliases(aliases, truth)
        >>> (s.correct_at_1, s.proposed_terms, s.typo_terms, s.found)
        (1, 3, 2, 2)
    """
    for name, frame, needed in (("aliases", aliases, ("term", "rank", "alias")),
                                ("truth", truth, ("term", "word", "edit"))):
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise InvalidInputError(f"{name} lacks column(s) {missing}; it needs {list(needed)}")
    terms = truth.select("term", "word", "edit").unique()
    clash = terms.group_by("term").agg(pl.col("word").n_unique()).filter(pl.col("word") > 1)
    if clash.height:
        raise InvalidInputError(f"the truth names two words for {clash.height} term(s), e.g. "
                                f"{clash.get_column('term')[0]!r}; one word per term")
    first = aliases.filter(pl.col("rank") == 1).select("term", pl.col("alias").alias("first"))
    listed = aliases.group_by("term").agg(pl.col("alias").alias("listed"))
    scored = (
        terms.join(first, on="term", how="left").join(listed, on="term", how="left")
        .with_columns(
            pl.col("edit").is_in(list(TYPO_EDITS)).alias("typo"),
            pl.col("first").is_not_null().alias("proposed"),
            (pl.col("first") == pl.col("word")).fill_null(False).alias("correct_at_1"),
            pl.col("listed").list.contains(pl.col("word")).fill_null(False).alias("found"),
        )
    )
    # proposals for terms the truth does not know still count as proposed (wrong)
    unknown = first.join(terms.select("term"), on="term", how="anti").height
    typos = scored.filter("typo")
    by_edit = (
        scored.group_by("edit")
        .agg(pl.len().cast(pl.Int64).alias("terms"),
             pl.col("proposed").sum().cast(pl.Int64),
             pl.col("correct_at_1").sum().cast(pl.Int64),
             pl.col("found").sum().cast(pl.Int64))
        .sort("edit")
    )
    return AliasScore(
        typo_terms=typos.height,
        proposed_terms=int(scored.get_column("proposed").sum()) + unknown,
        correct_at_1=int(typos.get_column("correct_at_1").sum()),
        found=int(typos.get_column("found").sum()),
        by_edit=by_edit,
    )


@dataclass(frozen=True)
class RecallScore:
    """How well the recall-coverage audit and the life of a miss match a ground truth.

    Attributes:
        planted_dead: planted dead-weight capsules (never recalled nor returned).
        dead_found: of those, the ones ``never_recalled`` lists.
        listed: capsules ``never_recalled`` lists.
        listed_right: of those, the ones the truth never recalled nor returned.
        terms: missed terms in the truth.
        terms_right: terms whose ``resolved_at`` and ``resolved_by`` are the truth's (both
            null for an open term).
        planted_resolutions: terms the truth says a planted receipt or a planted taught
            alias answered.
        planted_right: of those, the ones the lifecycle resolves the same way.
        planted_aliases: of the planted resolutions, those by a taught alias.
        planted_aliases_right: of those, the ones the lifecycle resolves the same way.

    Examples:
        >>> s = RecallScore(planted_dead=10, dead_found=10, listed=20, listed_right=19,
        ...                 terms=4, terms_right=4, planted_resolutions=2, planted_right=2)
        >>> s.dead_weight_recall, s.never_recalled_precision, s.resolution_accuracy
        (1.0, 0.95, 1.0)
    """

    planted_dead: int
    dead_found: int
    listed: int
    listed_right: int
    terms: int
    terms_right: int
    planted_resolutions: int
    planted_right: int
    planted_aliases: int = 0
    planted_aliases_right: int = 0

    @property
    def dead_weight_recall(self) -> float:
        """Share of the planted dead weight that ``never_recalled`` lists (1.0 when none)."""
        return self.dead_found / self.planted_dead if self.planted_dead else 1.0

    @property
    def never_recalled_precision(self) -> float:
        """Share of the listed capsules truly never recalled nor returned (1.0 when none)."""
        return self.listed_right / self.listed if self.listed else 1.0

    @property
    def resolution_accuracy(self) -> float:
        """Share of missed terms resolved (or left open) as the truth says (1.0 when none)."""
        return self.terms_right / self.terms if self.terms else 1.0

    @property
    def planted_resolution_recall(self) -> float:
        """Share of the planted resolutions the lifecycle finds (1.0 when none)."""
        return self.planted_right / self.planted_resolutions if self.planted_resolutions else 1.0

    @property
    def planted_alias_recall(self) -> float:
        """Share of the resolutions by a planted taught alias the lifecycle finds (1.0
        when none)."""
        return (self.planted_aliases_right / self.planted_aliases if self.planted_aliases
                else 1.0)

    def to_dict(self) -> dict[str, float | int]:
        """The counts and the five rates (rounded to 4 places) as plain data."""
        return {**{f.name: getattr(self, f.name) for f in fields(self)},
                "dead_weight_recall": round(self.dead_weight_recall, 4),
                "never_recalled_precision": round(self.never_recalled_precision, 4),
                "resolution_accuracy": round(self.resolution_accuracy, 4),
                "planted_resolution_recall": round(self.planted_resolution_recall, 4),
                "planted_alias_recall": round(self.planted_alias_recall, 4)}

    def __repr__(self) -> str:
        return (f"<RecallScore dead_weight_recall={self.dead_weight_recall:.3f} "
                f"never_recalled_precision={self.never_recalled_precision:.3f} "
                f"resolution_accuracy={self.resolution_accuracy:.3f} "
                f"planted_resolution_recall={self.planted_resolution_recall:.3f} "
                f"planted_alias_recall={self.planted_alias_recall:.3f}>")


def score_recall(never_recalled: pl.DataFrame, lifecycle: pl.DataFrame, truth: Any) -> RecallScore:
    """Score the recall-coverage audit's ``never_recalled`` and a miss audit's
    ``lifecycle`` against a ground truth.

    Args:
        never_recalled: :attr:`memframe.audit.RecallCoverage.never_recalled` (``id``).
        lifecycle: :attr:`memframe.audit.MissAudit.lifecycle` (``term``, ``resolved_at``,
            ``resolved_by``).
        truth: a :class:`memframe.synth.RecallTruth` (``dead_weight``, ``recalled``,
            ``resolutions``), as :func:`memframe.synth.recall_truth` returns it.

    Returns:
        A :class:`RecallScore`.

    Raises:
        InvalidInputError: a frame lacks a needed column.

    Examples:
        >>> import datetime as dt
        >>> from types import SimpleNamespace
        >>> t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> truth = SimpleNamespace(
        ...     dead_weight=pl.DataFrame({"id": ["cap-1", "cap-2"]}),
        ...     recalled=pl.DataFrame({"id": ["cap-3"]}),
        ...     resolutions=pl.DataFrame({"term": ["kafka", "retreival"],
        ...                               "resolved_at": [t0, None],
        ...                               "resolved_by": ["rcpt-4", None],
        ...                               "planted": [True, False]}))
        >>> life = pl.DataFrame({"term": ["kafka", "retreival"], "resolved_at": [t0, t0],
        ...                      "resolved_by": ["rcpt-4", "cap-9"]})
        >>> s = score_recall(pl.DataFrame({"id": ["cap-1", "cap-3"]}), life, truth)
        >>> (s.dead_found, s.listed_right, s.terms_right, s.planted_right)
        (1, 1, 1, 1)
    """
    for name, frame, needed in (
            ("never_recalled", never_recalled, ("id",)),
            ("lifecycle", lifecycle, ("term", "resolved_at", "resolved_by")),
            ("truth.resolutions", truth.resolutions,
             ("term", "resolved_at", "resolved_by", "planted"))):
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise InvalidInputError(f"{name} lacks column(s) {missing}; it needs {list(needed)}")
    listed = never_recalled.select("id").unique()
    dead = truth.dead_weight.select("id").unique()
    # the kind of answer counts too when both frames name it (an alias spelled like an id
    # must not pass for that capsule or receipt)
    kind = "resolution" in truth.resolutions.columns and "resolution" in lifecycle.columns
    want = truth.resolutions.select(
        "term", "resolved_at", "resolved_by", "planted",
        pl.col("resolution") if "resolution" in truth.resolutions.columns
        else pl.lit(None, dtype=pl.String).alias("resolution"))
    got = lifecycle.select("term", pl.col("resolved_at").alias("got_at"),
                           pl.col("resolved_by").alias("got_by"),
                           (pl.col("resolution") if kind else pl.lit(None, dtype=pl.String))
                           .alias("got_kind"))
    joined = want.join(got, on="term", how="left").with_columns(
        (pl.col("got_at").eq_missing(pl.col("resolved_at"))
         & pl.col("got_by").eq_missing(pl.col("resolved_by"))
         & (pl.col("got_kind").eq_missing(pl.col("resolution")) if kind else pl.lit(True)))
        .alias("right"))
    planted = joined.filter("planted")
    aliases = planted.filter(pl.col("resolution") == "alias")
    return RecallScore(
        planted_dead=dead.height,
        dead_found=dead.join(listed, on="id", how="semi").height,
        listed=listed.height,
        listed_right=listed.join(truth.recalled.select("id"), on="id", how="anti").height,
        terms=joined.height,
        terms_right=int(joined["right"].sum()),
        planted_resolutions=planted.height,
        planted_right=int(planted["right"].sum()),
        planted_aliases=aliases.height,
        planted_aliases_right=int(aliases["right"].sum()),
    )
