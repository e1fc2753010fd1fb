"""The on-disk format is readable by another engine, exactly as the README documents it."""

from __future__ import annotations

import json

import duckdb


def parts_by_replay(root) -> dict[str, set[str]]:
    parts: dict[str, set[str]] = {}
    for f in sorted((root / "_log").glob("[0-9]*.json")):
        entry = json.loads(f.read_text())
        for path in entry["remove"]:
            for ps in parts.values():
                ps.discard(path)
        for add in entry["add"]:
            parts.setdefault(add["table"], set()).add(add["path"])
    return parts


def test_another_engine_reads_a_generation_from_the_log_alone(store):
    store.ingest([{"content": f"c{i}", "source": "s", "anchor": "a",
                   "project_id": "team" if i % 2 else "ops"} for i in range(6)])
    store.ingest({"content": "secret", "source": "s", "anchor": "b", "project_id": "ops"})
    store.forget("cap-7", mode="purge")  # rewrites a partition: a remove + an add
    store.ingest({"content": "late", "source": "s", "anchor": "c", "project_id": "team"})
    store.compact()
    parts = parts_by_replay(store.path)
    assert parts["capsules"] == {p.relative_to(store.path).as_posix()
                                 for p in store.files("capsules")}
    files = [str(store.path / p) for p in sorted(parts["capsules"])]
    got = duckdb.sql(f"select project_id, count(*) as n, count(content) as c "
                     f"from read_parquet({files}) group by 1 order by 1").fetchall()
    assert got == [("ops", 4, 3), ("team", 4, 4)]
    ours = (store.table("capsules").group_by("project_id")
            .agg(n=__import__("polars").len()).sort("project_id").collect().rows())
    assert [(p, n) for p, n, _ in got] == ours


def test_a_store_whose_directory_name_looks_like_a_glob_reads_every_row(tmp_path, clock):
    # "[x]" is a character class to a glob: read as a pattern, "runs[x]" names "runsx" and
    # every table reads empty (and the digest fails closed) without a word
    import memframe as mf

    for name in ("runs[x]", "a*b?c", "{a,b}"):
        store = mf.Store.create(tmp_path / name, clock=clock)
        store.ingest([{"content": f"c{i}", "source": "s", "anchor": "a",
                       "conversation_id": "conv"} for i in range(3)])
        store.memory.run_cycle()
        assert store.table("capsules").collect().height == 3
        assert mf.digest(store).to_dict()["total"] == 3
        assert store.memory.sessions().rows.get_column("memory_count").to_list() == [3]
