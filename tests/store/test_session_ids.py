"""Session ids are parsed by the package's one parser (`memframe.ids`) on every path: the
verbs, a bulk write of bracket rows and the nMEMORY importer refuse anything that is not
``sess-<n>`` (n from 1, ASCII digits, no leading zero) with an error that says what an id
is, and nothing is written."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

import memframe as mf
from memframe.errors import ImportSourceError, InvalidInputError, SessionError
from memframe.ids import session_number
from memframe.importers import import_nmemory
from tests.importers.nmemory_fixture import Builder

BAD = ["sess-abc", "sess-01", "sess-", "sess-0", "sess-\u0663", "sess-1 ", "SESS-1", "s-1", 7]


@pytest.mark.parametrize("sid", BAD, ids=repr)
def test_session_start_refuses_what_is_not_a_session_id(store, sid):
    generation = store.generation
    with pytest.raises(InvalidInputError, match=r"session ids are 'sess-<n>'.*got"):
        store.session_start("p", session_id=sid)
    assert store.generation == generation  # nothing written
    assert mf.digest(store).to_dict()["open_session_ids"] == []


@pytest.mark.parametrize("sid", BAD, ids=repr)
def test_session_finish_names_the_rule(store, sid):
    store.session_start("p")
    with pytest.raises(InvalidInputError, match=r"session ids are 'sess-<n>'"):
        store.session_finish(sid)


def test_explicit_canonical_ids_are_taken(store):
    assert store.session_start("p", session_id="sess-2") == "sess-2"
    assert store.session_start("p") == "sess-3"  # the counter moved past sess-2
    with pytest.raises(SessionError, match="already exists"):
        store.session_start("p", session_id="sess-3")
    assert store.session_start("p", session_id="sess-1") == "sess-1"
    store.session_finish("sess-2")
    assert mf.digest(store).to_dict()["open_session_ids"] == ["sess-3", "sess-1"]


def test_bracket_rows_with_other_ids_fail_the_schema():
    at = dt.datetime(2026, 7, 23, tzinfo=dt.UTC)
    rows = pl.DataFrame({"seq": [1, 2], "at": [at, at], "session_id": ["sess-4", "sess-04"],
                         "event": ["start", "start"], "project_id": ["p", "p"],
                         "summary": [None, None]},
                        schema_overrides={"summary": pl.String, "at": mf.schema.TIMESTAMP})
    mf.schema.validate_frame("brackets", rows.head(1))
    with pytest.raises(InvalidInputError, match="session_id"):
        mf.schema.validate_frame("brackets", rows)


@pytest.mark.parametrize("sid", ["sess-01", "sess-abc", "sess-"])
def test_the_importer_refuses_a_source_session_that_is_not_an_id(tmp_path, sid):
    b = Builder(tmp_path / "src.db")
    b.session_start("p", at="2026-07-01T00:00:00Z")
    b.con.execute("INSERT INTO sessions VALUES (?, ?, NULL, NULL)",
                  (sid, "2026-07-01T00:00:01Z"))
    b.close()
    with pytest.raises(ImportSourceError, match=rf"{sid!r}: session ids are 'sess-<n>'"):
        import_nmemory(tmp_path / "src.db", tmp_path / "s", progress=False)
    assert not mf.Store.is_store(tmp_path / "s")


def test_one_parser():
    assert [session_number(v) for v in ("sess-1", "sess-12", *BAD)] == [1, 12] + [None] * len(BAD)
