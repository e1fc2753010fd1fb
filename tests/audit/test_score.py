"""score_aliases counts right and wrong first proposals over distinct terms."""

from __future__ import annotations

import polars as pl
import pytest

from memframe.audit import score_aliases
from memframe.errors import InvalidInputError


def _aliases(rows):
    return pl.DataFrame(rows, schema={"term": pl.String, "rank": pl.Int64, "alias": pl.String},
                        orient="row")


TRUTH = pl.DataFrame({
    "term": ["retreival", "retreival", "cahce", "embeding", "kafka", "index", "0a1b2c3"],
    "word": ["retrieval", "retrieval", "cache", "embedding", None, "index", None],
    "edit": ["transpose", "transpose", "transpose", "delete", "absent", "exact", "absent"],
})


def test_counts_over_distinct_terms():
    aliases = _aliases([("retreival", 1, "retrieval"), ("cahce", 1, "cached"),
                        ("cahce", 2, "cache"), ("kafka", 1, "afka")])
    s = score_aliases(aliases, TRUTH)
    assert (s.typo_terms, s.proposed_terms, s.correct_at_1, s.found) == (3, 3, 1, 2)
    assert s.precision_at_1 == pytest.approx(1 / 3)
    assert s.recall_at_1 == pytest.approx(1 / 3)
    assert s.recall == pytest.approx(2 / 3)
    by_edit = {r["edit"]: (r["terms"], r["proposed"], r["correct_at_1"], r["found"])
               for r in s.by_edit.iter_rows(named=True)}
    assert by_edit == {"absent": (2, 1, 0, 0), "delete": (1, 0, 0, 0), "exact": (1, 0, 0, 0),
                       "transpose": (2, 2, 1, 2)}
    assert s.to_dict()["recall"] == round(2 / 3, 4)


def test_a_proposal_for_a_term_the_truth_lacks_counts_as_wrong():
    aliases = _aliases([("retreival", 1, "retrieval"), ("zzz-unknown", 1, "zzz")])
    s = score_aliases(aliases, TRUTH)
    assert (s.proposed_terms, s.correct_at_1) == (2, 1)
    assert s.precision_at_1 == 0.5


def test_no_proposals_at_all():
    s = score_aliases(_aliases([]), TRUTH)
    assert (s.proposed_terms, s.correct_at_1, s.found) == (0, 0, 0)
    assert s.precision_at_1 == 1.0 and s.recall == 0.0


def test_bad_frames_are_refused():
    with pytest.raises(InvalidInputError, match="lacks column"):
        score_aliases(pl.DataFrame({"term": ["a"]}), TRUTH)
    clash = pl.DataFrame({"term": ["a", "a"], "word": ["b", "c"], "edit": ["delete"] * 2})
    with pytest.raises(InvalidInputError, match="two words"):
        score_aliases(_aliases([]), clash)
