"""abstract() and the language seam (rule 10): prose lands atomically, never from the engine."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import polars as pl
import pytest

import memframe as mf
from memframe.projections.abstract import AbstractRefusedError
from tests.projections.helpers import caps, stored_rows

ROOT = Path(__file__).parents[2]


def _facts(view) -> tuple[pl.DataFrame, pl.DataFrame, set[str]]:
    processing = view.table("processing").select("capsule_id", "abstracted_into_memory_id").collect()
    edges = (view.table("relations").filter(pl.col("kind") == "abstracted_into")
             .select(pl.col("from_id").alias("capsule_id"),
                     pl.col("to_id").alias("abstracted_into_memory_id")).collect())
    ids = set(view.table("capsules").select("id").collect()["id"])
    return processing, edges, ids


def assert_all_three_or_none(view) -> int:
    processing, edges, ids = _facts(view)
    assert sorted(processing.rows()) == sorted(edges.rows())
    assert set(processing["abstracted_into_memory_id"]) <= ids
    assert processing["capsule_id"].is_unique().all()
    return processing.height


def test_abstract_lands_three_facts_in_one_commit(mstore):
    a, b, c = mstore.ingest(caps([("x", 1), ("x", 2), ("x", 3)]))
    g = mstore.generation
    rollup = mstore.memory.abstract([a, b], "a and b, in short", source="rollup", anchor="ab",
                                    conversation_id="x", author="summariser")
    assert mstore.generation == g + 1
    assert assert_all_three_or_none(mstore) == 2
    row = mstore.table("capsules").filter(pl.col("id") == rollup).collect().row(0, named=True)
    assert (row["content"], row["source"], row["author"]) == ("a and b, in short", "rollup",
                                                              "summariser")
    assert mstore.at(g).table("processing").collect().height == 0
    # a member already abstracted, a missing one, a tombstoned one: refused, nothing written
    g = mstore.generation
    with pytest.raises(AbstractRefusedError):
        mstore.memory.abstract([c, a], "again", source="rollup", anchor="ca")
    with pytest.raises(mf.errors.UnknownCapsuleError):
        mstore.memory.abstract([c, "cap-99"], "missing", source="rollup", anchor="c")
    mstore.forget(c)
    with pytest.raises(mf.errors.UnknownCapsuleError):
        mstore.memory.abstract([c], "tombstoned", source="rollup", anchor="c")
    with pytest.raises(mf.errors.InvalidInputError):
        mstore.memory.abstract([], "nothing", source="rollup", anchor="c")
    assert mstore.generation == g + 1  # only the forget landed
    assert mstore.table("capsules").filter(pl.col("content") == "again").collect().height == 0


def test_a_concurrent_abstract_of_the_same_member_fails_cleanly(tmp_path):
    path = tmp_path / "s"
    first = mf.Store.create(path)
    a, b = first.ingest(caps([("x", 1), ("x", 2)]))
    second = mf.Store.open(path)
    with pytest.raises(AbstractRefusedError), second.transaction():
        # validated against this generation, then another writer lands first
        second.memory.abstract([a, b], "second's rollup", source="rollup", anchor="2")
        first.memory.abstract([b], "first's rollup", source="rollup", anchor="1")
    view = mf.Store.open(path)
    assert assert_all_three_or_none(view) == 1
    assert view.table("capsules").filter(pl.col("content") == "second's rollup").collect().height == 0


WRITER = textwrap.dedent("""
    import sys, memframe as mf
    store = mf.Store.open(sys.argv[1])
    tag, i = sys.argv[2], 0
    while True:
        if i == 1:
            print("ready", flush=True)  # warmed up: the kills land in steady-state commits
        ids = store.ingest([{"content": f"{tag}-{i}-{k}", "source": "kill", "anchor": "m",
                             "conversation_id": f"{tag}"} for k in range(3)])
        store.memory.abstract(ids, f"{tag}-{i}-rollup", source="rollup", anchor="r")
        i += 1
""")


@pytest.mark.slow
def test_sigkill_never_shows_part_of_an_abstract(tmp_path):
    path = tmp_path / "s"
    mf.Store.create(path)
    rng = random.Random(11)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    absorbed = []
    for trial in range(12):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"t{trial}"],
                                 stdout=subprocess.PIPE, text=True, env=env)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 0.8))
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
        absorbed.append(assert_all_three_or_none(mf.Store.open(path)))
    grew = sum(b > a for a, b in zip([0, *absorbed], absorbed, strict=False))
    assert grew >= 4  # the writer really abstracted between kills, several times
    store = mf.Store.open(path)
    for g in range(1, store.generation + 1):  # whatever generation a reader pins
        assert_all_three_or_none(store.at(g))
    store.memory.run_cycle()  # and the projection folds the survivors
    members = store.table("capsules").filter(pl.col("conversation_id").is_not_null())
    assert stored_rows(store)["memory_count"].sum() == members.collect().height


def test_summarize_lands_canonical_rows_and_the_fold_carries_them(mstore):
    mstore.ingest(caps([("a", 1), ("a", 2), ("b", 3)]))
    mstore.memory.run_cycle()
    assert stored_rows(mstore)["summary"].to_list() == [None, None]  # the engine writes none
    seen = {}

    def summarizer(rows: pl.DataFrame) -> str | None:
        conv = rows["conversation_id"][0]
        seen[conv] = rows["id"].to_list()
        return None if conv == "b" else f"{rows.height} memories"

    assert mstore.memory.summarize(["a", "b"], summarizer) == {"a": "2 memories"}
    assert seen == {"a": ["cap-1", "cap-2"], "b": ["cap-3"]}
    assert mstore.table("summaries").select("conversation_id", "summary").collect().rows() == [
        ("a", "2 memories")]
    mstore.memory.run_cycle()
    assert stored_rows(mstore)["summary"].to_list() == ["2 memories", None]
    mstore.memory.summarize("a", lambda rows: "newer words")
    mstore.memory.run_cycle()
    incremental = stored_rows(mstore)
    assert incremental["summary"][0] == "newer words"
    mstore.memory.rebuild_projections()
    assert stored_rows(mstore).equals(incremental)  # a rebuild keeps it
    with pytest.raises(mf.errors.InvalidInputError):
        mstore.memory.summarize(["nobody"], lambda rows: "x")
    with pytest.raises(mf.errors.InvalidInputError):
        mstore.memory.summarize(["a"], lambda rows: 42)
