"""Schemas: the pandera models and the plain column lists agree; errors name the column."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys

import polars as pl
import pytest

from memframe import schema as S
from memframe.errors import SchemaValidationError


@pytest.mark.parametrize("table", S.CANONICAL_TABLES)
def test_each_model_declares_exactly_the_table_columns(table):
    assert tuple(S.model(table).to_schema().columns) == S.CANONICAL_COLUMNS[table]
    assert S.empty_frame(table).columns == list(S.CANONICAL_COLUMNS[table])


def test_a_bad_row_is_refused_naming_column_and_row():
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    frame = pl.DataFrame({"seq": [1, 2], "at": [at, at], "capsule_id": ["cap-1", "cap-2"],
                          "tier": ["active", "golden"]}).with_columns(pl.col("at").cast(S.TIMESTAMP))
    with pytest.raises(SchemaValidationError, match=r"tiers.tier: value 'golden' at row 1") as info:
        S.validate_frame("tiers", frame)
    assert (info.value.column, info.value.row) == ("tier", 1)
    with pytest.raises(SchemaValidationError, match="missing column"):
        S.validate_frame("tiers", frame.drop("tier"))


def test_reading_a_store_does_not_import_pandera(tmp_path):
    code = ("import sys, memframe as mf\n"
            f"s = mf.Store.create({str(tmp_path / 's')!r})\n"
            "mf.digest(s).to_json(); s.capsule_state().collect()\n"
            "print('pandera' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
