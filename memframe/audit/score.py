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

from dataclasses import dataclass

import polars as pl

from memframe.errors import InvalidInputError

__all__ = ["AliasScore", "score_aliases", "TYPO_EDITS"]

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
