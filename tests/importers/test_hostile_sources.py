"""Hostile nMEMORY sources (issue 38): state rows for ids the source never issued,
counts past what the API accepts, JSON nested to exhaust the parser, and an in-place edit
of a row an earlier import took. Each is refused, naming the row, and nothing is written."""

from __future__ import annotations

import pytest
from import_helpers import execute
from nmemory_fixture import build_rich, grow_rich

import memframe as mf
from memframe.importers import ImportSourceError, SourceRewrittenError, import_nmemory

STATE_ROWS = {
    "usage": "INSERT INTO usage (capsule_id, recall_count, last_recalled_at) "
             "VALUES ('cap-999', 3, '2026-07-22T00:00:00Z')",
    "classifications": "INSERT INTO classifications (capsule_id, kind, scope, at) "
                       "VALUES ('cap-999', 'task', 'project', '2026-07-22T00:00:00Z')",
    "tiers": "INSERT INTO tiers (capsule_id, tier, at) "
             "VALUES ('cap-999', 'archived', '2026-07-22T00:00:00Z')",
}


@pytest.mark.parametrize("table", sorted(STATE_ROWS))
def test_state_rows_for_an_id_the_source_never_issued_are_refused(tmp_path, table):
    db = build_rich(tmp_path / "a.db")
    execute(db, STATE_ROWS[table])
    with pytest.raises(ImportSourceError, match=rf"{table}.*cap-999.*names no capsule"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("table", sorted(STATE_ROWS))
def test_state_rows_for_an_unissued_id_are_refused_on_a_reimport(tmp_path, table):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    execute(db, STATE_ROWS[table])
    with pytest.raises(ImportSourceError, match="cap-999"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert mf.Store.open(tmp_path / "s").generation == 1


def test_a_recall_count_past_the_api_bound_is_refused(tmp_path):
    db = build_rich(tmp_path / "a.db")
    execute(db, f"UPDATE usage SET recall_count = {2**63 - 1} WHERE capsule_id = 'cap-1'")
    with pytest.raises(ImportSourceError, match="recall_count is beyond"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


def test_canonical_json_nested_too_deep_is_a_teaching_error(tmp_path):
    db = build_rich(tmp_path / "a.db")
    deep = "[" * 50_000 + "]" * 50_000
    execute(db, ("UPDATE capsules SET canonical_json = ? WHERE id = 'cap-2'", (deep,)))
    with pytest.raises(ImportSourceError, match=r"cap-2.*nests deeper"):
        import_nmemory(db, tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


EDITS = {
    "capsule content": "UPDATE capsules SET canonical_json = replace(canonical_json, "
                       "'\"content\":\"', '\"content\":\"EDITED ') WHERE id = 'cap-2'",
    "journal reason": "UPDATE audit_events SET reason = 'edited' WHERE seq = 1",
    "miss term": "UPDATE recall_misses SET term = 'edited' WHERE seq = 1",
}


@pytest.mark.parametrize("case", sorted(EDITS))
def test_an_in_place_edit_of_an_imported_row_is_refused(tmp_path, case):
    db = build_rich(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    for grow in (False, True):
        if grow:
            grow_rich(db)
        execute(db, EDITS[case])
        with pytest.raises(SourceRewrittenError, match="edited in place"):
            import_nmemory(db, tmp_path / "s", progress=False)
        assert mf.Store.open(tmp_path / "s").generation == 1
