"""The content-hash index the ingest verb answers "already stored?" from.

Hashes are looked up by a 60-bit prefix and every hit is confirmed against the stored
hash, so a shared prefix can never answer with the wrong capsule. Real collisions are too
rare to meet, so these tests shorten the prefix to one hex digit: then most lookups meet
several candidates, in the sorted base and in the recent tail alike.
"""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.store import index
from tests.conftest import TickingClock


@pytest.fixture
def coarse_prefix(monkeypatch):
    monkeypatch.setattr(index, "_prefix_expr",
                        lambda column: pl.col(column).str.slice(0, 1).str.to_integer(base=16))


def _rows(texts):
    return [{"content": t, "source": "test", "anchor": "a"} for t in texts]


@pytest.mark.parametrize(("tail_limit", "probes"), [(3, 1_024), (50_000, 1_024), (50_000, 0)],
                         ids=["sorted-base", "tail-by-key", "tail-joined"])
def test_shared_prefixes_answer_the_exact_capsule(tmp_path, monkeypatch, coarse_prefix,
                                                  tail_limit, probes):
    monkeypatch.setattr(index, "_TAIL_LIMIT", tail_limit)
    monkeypatch.setattr(index, "_TAIL_PROBES", probes)
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    texts = [f"note {i}" for i in range(60)]
    first = [store.ingest(_rows([t]))[0] for t in texts[:30]]
    first += store.ingest(_rows(texts[30:]))
    assert first == [f"cap-{i}" for i in range(1, 61)]
    # every content again, shuffled, with new ones mixed in: old ones answer their own id
    again = texts[::-1] + ["fresh a", "fresh b"]
    ids = store.ingest(_rows(again))
    assert ids == [f"cap-{i}" for i in range(60, 0, -1)] + ["cap-61", "cap-62"]
    assert store.table("capsules").collect().height == 62


@settings(max_examples=25, deadline=None)
@given(batches=st.lists(st.lists(st.sampled_from([f"t{i}" for i in range(12)]), min_size=1,
                                 max_size=6), min_size=1, max_size=5))
def test_ids_follow_first_occurrence_whatever_the_batches(tmp_path_factory, batches):
    store = mf.Store.create(tmp_path_factory.mktemp("s") / "s", clock=TickingClock())
    seen: dict[str, str] = {}
    for batch in batches:
        expected = []
        for text in batch:
            seen.setdefault(text, f"cap-{len(seen) + 1}")
            expected.append(seen[text])
        assert store.ingest(_rows(batch)) == expected
    stored = store.table("capsules").collect()
    assert stored.height == len(seen)
    assert dict(zip(stored["content"], stored["id"], strict=True)) == seen


def test_a_handle_folds_its_own_commits_and_still_sees_another_writer(tmp_path, monkeypatch):
    path = tmp_path / "s"
    first = mf.Store.create(path, clock=TickingClock())
    second = mf.Store.open(path, clock=TickingClock())
    assert first.ingest(_rows(["a", "b"])) == ["cap-1", "cap-2"]
    first.relate("cap-2", "cap-1", "blocks")
    reads: list[str] = []
    real = index.Indexes._new_rows

    def catching_up(self, table, columns):
        frame = real(self, table, columns)
        if frame is not None:
            assert frame.height  # rows to fold, or None
            reads.append(table)
        return frame

    monkeypatch.setattr(index.Indexes, "_new_rows", catching_up)
    # the handle's own rows are known without reading them back
    assert first.ingest(_rows(["a", "c"])) == ["cap-1", "cap-3"]
    first.relate("cap-2", "cap-1", "blocks")  # already stored: skipped
    assert reads == []
    # another handle's rows are read, and the first handle then sees them too
    assert second.ingest(_rows(["c", "d"])) == ["cap-3", "cap-4"]
    second.relate("cap-4", "cap-3", "blocks")
    assert "capsules" in reads  # the second handle caught up on the first one's rows
    reads.clear()
    assert first.ingest(_rows(["d", "e"])) == ["cap-4", "cap-5"]
    first.relate("cap-4", "cap-3", "blocks")  # stored by the other handle: skipped
    assert sorted(set(reads)) == ["capsules", "relations"]  # ... which the first one read
    first.forget("cap-5")
    with pytest.raises(mf.errors.TombstonedContentError):
        second.ingest(_rows(["e"]))
    edges = mf.Store.open(path).table("relations").collect()
    assert edges.height == 2


def test_catching_up_on_a_commit_that_added_no_rows_folds_nothing(tmp_path, monkeypatch):
    """A handle catches up after every other handle's commit. One that added no rows a
    lookup folds (an erasure rewrites capsule parts below what was folded; a forget adds
    none of ``capsules``) is caught up without a frame or a fold, and the lookups still
    see what it did."""
    path = tmp_path / "s"
    first = mf.Store.create(path, clock=TickingClock())
    second = mf.Store.open(path, clock=TickingClock())
    assert first.ingest(_rows(["a", "b", "c"])) == ["cap-1", "cap-2", "cap-3"]
    assert first.ingest(_rows(["d"])) == ["cap-4"]  # the first handle's lookups are loaded
    folded: list[tuple[str, int]] = []
    for piece in ("hashes", "forgets"):
        real = getattr(index.Indexes, f"_fold_{piece}")

        def fold(self, rows, real=real, piece=piece):  # noqa: ANN001, ANN202
            folded.append((piece, rows.height))
            return real(self, rows)

        monkeypatch.setattr(index.Indexes, f"_fold_{piece}", fold)
    second.forget("cap-2", mode="purge")  # rewrites cap-2's part, adds a forgets row
    assert first.ingest(_rows(["e"])) == ["cap-5"]
    assert ("hashes", 0) not in folded  # nothing of ``capsules`` to fold: no frame
    assert all(rows for _piece, rows in folded)
    # and what the other handle did is seen: the purged content stays refused
    with pytest.raises(mf.errors.TombstonedContentError):
        first.ingest(_rows(["b"]))
    assert ("forgets", 1) in folded
    assert first.ingest(_rows(["a"])) == ["cap-1"]  # stored contents still found


_STEP = st.tuples(st.integers(0, 1), st.sampled_from(
    ["ingest", "ingest", "ingest", "tombstone", "purge", "compact", "vacuum"]),
    st.integers(0, 5))


@settings(max_examples=20, deadline=None)
@given(steps=st.lists(_STEP, min_size=1, max_size=14))
def test_two_handles_interleaved_answer_as_one_store(tmp_path_factory, steps):
    """Whatever the other handle did between a handle's commits (new contents, tombstones,
    erasures, compactions that rewrite the parts its lookups were folded from, vacuums),
    its lookups catch up exactly: an ingest answers the stored capsule, a new id, or the
    refusal of a forgotten content, as one handle alone would."""
    path = tmp_path_factory.mktemp("s") / "s"
    handles = [mf.Store.create(path, clock=TickingClock())]
    handles.append(mf.Store.open(path, clock=TickingClock()))
    stored: dict[str, str] = {}  # content -> id
    forgotten: set[str] = set()
    for who, verb, n in steps:
        store, text = handles[who], f"content {n}"
        if verb == "ingest":
            if text in forgotten:
                with pytest.raises(mf.errors.TombstonedContentError):
                    store.ingest(_rows([text]))
                continue
            stored.setdefault(text, f"cap-{len(stored) + 1}")
            assert store.ingest(_rows([text])) == [stored[text]]
        elif verb in ("tombstone", "purge"):
            if text in stored and text not in forgotten:
                store.forget(stored[text], mode=verb)
                forgotten.add(text)
        elif verb == "compact":
            store.compact()
        else:
            store.vacuum()
    capsules = mf.Store.open(path).table("capsules").collect()
    assert capsules.height == len(stored)
    assert capsules["source_hash"].n_unique() == capsules.height
