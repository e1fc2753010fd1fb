"""Law: the write path's one-pass check of a model accepts exactly what pandera accepts."""

from __future__ import annotations

import datetime as dt
import functools

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pandera.errors import SchemaError, SchemaErrors

from memframe import schema as S

T = dt.datetime(2026, 7, 23, tzinfo=dt.UTC)
VOCABULARIES = (S.RELATION_KINDS, S.RELATION_ORIGINS, S.CLASSIFICATION_KINDS,
                S.CLASSIFICATION_SCOPES, S.TIERS, S.AUTHORITY_CLASSES, S.FORGET_MODES,
                S.MISS_OUTCOMES, S.BRACKET_EVENTS, S.CORROBORATION_SOURCES,
                S.CORROBORATION_KINDS, S.CORROBORATION_VERDICTS, S.REVIEW_VERDICTS,
                S.RECEIPT_OUTCOMES, S.RECALL_LANES, S.EVIDENCE_STATES)
TEXT = ["", " ", "x", "cap-1", "cap-", "sess-2", "rcpt-3", "rcpt-03", "0" * 64, "f" * 64,
        "g" * 64, None,
        *sorted({v for vocabulary in VOCABULARIES for v in vocabulary})]


def candidates(dtype: pl.DataType) -> list:
    if dtype == pl.String:
        return TEXT
    if dtype == pl.Int64:
        return [-1, 0, 1, 2, 3, None]
    if dtype == pl.Float64:
        return [-0.5, 0.0, 0.6, 1.0, 1.5, float("nan"), None]
    if dtype == pl.Boolean:
        return [True, False, None]
    if dtype == pl.List(pl.String):
        return [[], ["x"], ["cap-1", "cap-2"], [None], None]
    return [T, None]


@functools.cache
def column_values(table: str, name: str) -> st.SearchStrategy:
    """Mostly values the column accepts (so whole frames often pass), some it refuses."""
    dtype = S.table_schema(table)[name]
    every = candidates(dtype)
    good = [v for v in every
            if pandera_accepts_column(table, name, pl.Series(name, [v], dtype=dtype))]
    return st.sampled_from(good * 8 + every)


def pandera_accepts_column(table: str, name: str, values: pl.Series) -> bool:
    column = S.model(table).to_schema().columns[name]
    try:
        column.validate(values.to_frame())
    except (SchemaError, SchemaErrors):
        return False
    return True


@st.composite
def frames(draw, table: str) -> pl.DataFrame:
    schema = S.table_schema(table)
    n = draw(st.integers(1, 4))
    return pl.DataFrame({name: draw(st.lists(column_values(table, name), min_size=n,
                                             max_size=n))
                         for name, dtype in schema.items()}, schema=schema)


def pandera_accepts(table: str, frame: pl.DataFrame) -> bool:
    try:
        S.model(table).validate(frame, lazy=True)
    except (SchemaError, SchemaErrors):
        return False
    return True


@pytest.mark.parametrize("table", S.CANONICAL_TABLES)
def test_the_one_pass_check_agrees_with_pandera(table):
    assert S._rules_expr(table) is not None  # every model's checks translate

    verdicts = []

    @settings(max_examples=80, deadline=None)
    @given(frame=frames(table))
    def agree(frame):
        verdict = pandera_accepts(table, frame)
        assert S._passes(table, frame) == verdict
        verdicts.append(verdict)

    agree()
    assert True in verdicts and False in verdicts  # both answers were exercised
