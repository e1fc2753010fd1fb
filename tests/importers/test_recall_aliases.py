"""The engine's taught aliases (``synonyms``) import as ``recall_aliases``, once and
incrementally, at schema v20 and v21; a file without the table has none."""

from __future__ import annotations

import sqlite3

import polars as pl
import pytest

import memframe as mf
from memframe.importers import import_nmemory
from tests.importers.nmemory_fixture import build_aliases, grow_aliases


def _source(db) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(db)
    try:
        return sorted(con.execute("SELECT term, alias, at FROM synonyms"))
    finally:
        con.close()


def _stored(path) -> list[tuple[str, str, str]]:
    rows = mf.Store.open(path).table("recall_aliases").select(
        "term", "alias", mf.text.rfc3339(pl.col("at")).alias("at")).collect()
    return sorted(rows.rows())


@pytest.mark.parametrize("version", [20, 21])
def test_a_store_imports_its_taught_aliases(tmp_path, version):
    db = build_aliases(tmp_path / "a.db", version=version)
    report = import_nmemory(db, tmp_path / "s", progress=False)
    assert report.added["recall_aliases"] == 2 and "synonyms" not in report.skipped
    assert _stored(tmp_path / "s") == _source(db) == [
        ("configuracao", "config", "2026-07-23T09:04:00.123456789Z"),
        ("pg", "postgres", "2026-07-23T09:02:00Z")]
    journal = mf.Store.open(tmp_path / "s").table("journal").filter(
        pl.col("action") == "memory_alias").select("subject", "reason").collect()
    assert journal.rows() == [("PG", "alias=Postgres"), ("Configuração", "alias=config")]
    # the lifecycle sees the imported alias: pg resolved by it, kube still open
    life = mf.audit.recall_misses(mf.Store.open(tmp_path / "s"), progress=False).lifecycle
    got = dict(life.select("term", "resolved_by").iter_rows())
    assert got == {"pg": "postgres", "kube": None}


def test_twice_incrementally_nothing_is_lost(tmp_path):
    db = build_aliases(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "inc", progress=False)
    for step, added in ((1, 3), (2, 1)):
        grow_aliases(db, step)
        report = import_nmemory(db, tmp_path / "inc", progress=False)
        assert report.mode == "incremental"
        assert report.added["recall_aliases"] == added  # kube -> kubernetes only once
        assert _stored(tmp_path / "inc") == _source(db)
    import_nmemory(db, tmp_path / "full", progress=False)
    inc, full = mf.Store.open(tmp_path / "inc"), mf.Store.open(tmp_path / "full")
    assert (inc.table("recall_aliases").drop("seq").sort("at", "term").collect().equals(
        full.table("recall_aliases").drop("seq").sort("at", "term").collect()))
    assert import_nmemory(db, tmp_path / "inc", progress=False).mode == "unchanged"
    # a store imported incrementally teaches on as one taught by hand
    assert inc.teach_alias("KUBE", "kubernetes") is False
    life = mf.audit.recall_misses(inc, progress=False).lifecycle
    assert dict(life.select("term", "resolution").iter_rows()) == {
        "pg": "alias", "kube": "alias", "term1": "alias", "term2": "alias"}


def test_a_file_without_the_table_has_none(tmp_path):
    db = build_aliases(tmp_path / "a.db")
    con = sqlite3.connect(db)
    con.execute("DROP TABLE synonyms")
    con.commit()
    con.close()
    report = import_nmemory(db, tmp_path / "s", progress=False)
    assert "recall_aliases" not in report.added and "synonyms" not in report.skipped
    assert mf.Store.open(tmp_path / "s").table("recall_aliases").collect().is_empty()


def test_a_dropped_table_or_a_row_the_engine_never_writes_is_refused(tmp_path):
    db = build_aliases(tmp_path / "a.db")
    import_nmemory(db, tmp_path / "s", progress=False)
    con = sqlite3.connect(db)
    con.execute("DELETE FROM synonyms")  # the engine's drop: it comes back empty
    con.commit()
    with pytest.raises(mf.MemframeError, match=r"taught alias 'pg' -> 'postgres' "
                                               r"disappeared"):
        import_nmemory(db, tmp_path / "s", progress=False)
    for bad, what in ((("Pg", "sql"), "term is not folded"), (("x", "x"), "alias equals")):
        con.execute("DELETE FROM synonyms")
        con.execute("INSERT INTO synonyms VALUES (?, ?, '2026-07-23T10:00:00Z')", bad)
        con.commit()
        with pytest.raises(mf.MemframeError, match=what):
            import_nmemory(db, tmp_path / "new", progress=False)
        assert not (tmp_path / "new").exists()
    con.close()
