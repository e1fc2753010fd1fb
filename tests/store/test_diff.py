"""`store.diff`: the law over random sessions of every verb (the digest machine's rules),
erased text never shown, and the errors of bad bounds."""

from __future__ import annotations

import datetime as dt
import json

import polars as pl
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

import memframe as mf
from memframe.schema import CANONICAL_TABLES
from tests.conftest import TickingClock
from tests.digest.machine import DigestMachine


def expected_changes(a: mf.StoreView, b: mf.StoreView) -> dict[str, list[str]]:
    """id -> the state columns that differ (empty: added), from every row of both states."""
    before = a.capsule_state().collect()  # raw values: the diff's text rendering is not used
    after = b.capsule_state().collect()
    old = {row["id"]: row for row in before.to_dicts()}
    out: dict[str, list[str]] = {}
    for row in after.to_dicts():
        was = old.get(row["id"])
        if was is None:
            out[row["id"]] = []
            continue
        fields = sorted(c for c in row if c != "id" and row[c] != was[c])
        if fields:
            out[row["id"]] = fields
    return out


def check_diff(store: mf.Store, since: int) -> None:
    view = store.pinned()
    d = store.diff(since)
    a = store.at(since)
    got = {i: f for i, f in d.capsules.select("id", "fields").iter_rows()}
    assert got == expected_changes(a, view), since
    changes = dict(d.capsules.select("id", "change").iter_rows())
    assert all((changes[i] == "added") == (f == []) for i, f in got.items())
    long = d.fields.group_by("id").agg(pl.col("field").sort())
    assert {i: f for i, f in long.iter_rows()} == {i: f for i, f in got.items() if f}
    assert d.to_json() == json.dumps(d.to_dict(), ensure_ascii=False, separators=(",", ":"))
    for table in CANONICAL_TABLES:
        seen = a.table(table).select("seq").collect().get_column("seq").implode()
        want = view.table(table).filter(~pl.col("seq").is_in(seen)).collect().sort("seq")
        assert d.rows(table).collect().sort("seq").equals(want), table


class DiffMachine(DigestMachine):
    """The machine's sessions; the diff from a few earlier generations after each step."""

    def digest_agrees(self) -> None:  # the digest's bytes are the machine's own test
        pass

    @invariant()
    def diff_agrees(self) -> None:
        g = self.store.generation
        for since in sorted({0, g // 2, max(g - 1, 0), g}):
            if self.store.at(since).readable():
                check_diff(self.store, since)
            else:  # vacuumed past (retention 0): refused with the teaching error
                with pytest.raises(mf.errors.GenerationNotFoundError, match="no longer"):
                    self.store.diff(since)


TestDiffMachine = DiffMachine.TestCase
TestDiffMachine.settings = settings(max_examples=6, stateful_step_count=20, deadline=None,
                                    suppress_health_check=list(HealthCheck))


def test_a_diff_across_a_purge_never_shows_the_old_text(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    [a, b] = store.ingest([{"content": "the secret plan", "source": "s", "anchor": "a"},
                           {"content": "kept", "source": "s", "anchor": "b"}])
    since = store.generation
    store.forget(a, mode="purge")
    d = store.diff(since)
    row = d.capsules.row(0, named=True)
    assert row["id"] == a and row["change"] == "changed" and "content" in row["fields"]
    assert "secret" not in d.to_json() and "secret" not in repr(d)
    content = d.fields.filter(pl.col("field") == "content").row(0, named=True)
    assert content["before"] is None and content["after"] is None
    assert d.summary == {"forgotten (purge)": 1}
    assert "secret" not in str(d.rows("capsules").collect().to_dicts())


def test_the_bounds_take_generations_instants_and_views_and_refuse_the_rest(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    store.ingest({"content": "one", "source": "s", "anchor": "a"})
    store.ingest({"content": "two", "source": "s", "anchor": "a"})
    by_number = store.diff(1)
    assert store.diff(store.at(1)).to_json() == by_number.to_json()
    instant = dt.datetime.fromisoformat(store.at(1).committed_at.replace("Z", "+00:00"))
    assert store.diff(instant).to_json() == by_number.to_json()
    assert store.diff(1, 2).summary == {"ingested": 1}
    store.teach_alias("retreival", "retrieval")
    store.record_recall(["cap-1"], terms=["one"])
    assert store.diff(2).summary == {"recall receipts": 1, "aliases taught": 1, "recalled": 1}
    assert store.at(2).diff(0, 1).summary == {"ingested": 1}
    assert by_number.rows_visited < 10  # what changed, not the store
    with pytest.raises(mf.errors.InvalidInputError, match="swap them"):
        store.diff(2, 1)
    with pytest.raises(mf.errors.InvalidInputError, match="not a generation"):
        store.diff(9)
    with pytest.raises(mf.errors.InvalidInputError, match="naive"):
        store.diff(dt.datetime(2026, 1, 1))
    with pytest.raises(mf.errors.InvalidInputError, match="generation number"):
        store.diff("yesterday")
    with pytest.raises(mf.errors.InvalidInputError, match="no canonical table"):
        by_number.rows("capsule")


def test_a_diff_from_a_vacuumed_generation_is_refused_even_when_no_row_changed(tmp_path):
    # regression: a compaction then a vacuum add no rows, so the diff once answered "nothing
    # changed" from a generation whose files were gone (and refused when rows had changed)
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    for text in ("one", "two"):
        store.ingest({"content": text, "source": "s", "anchor": "a"})
    store.compact("capsules", min_rows=2)
    since = store.generation - 1
    store.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=0.001,
                 wait_seconds=0)
    assert not store.at(since).readable()
    with pytest.raises(mf.errors.GenerationNotFoundError, match="no longer readable"):
        store.diff(since)
    assert store.diff(store.generation).capsules.height == 0  # the newest still answers


def test_a_vacuum_under_a_diff_is_named_not_a_raw_error(tmp_path, monkeypatch):
    """Regression: another handle's compaction and vacuum removed a part of the first
    generation while the diff read it (or before `rows` read it): a raw
    FileNotFoundError. It is the error that names the file and what is still readable."""
    from memframe.store import diff as diff_module

    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    for text in ("one", "two"):
        store.ingest({"content": text, "source": "s", "anchor": "a"})
    store.record_recall(["cap-1"])
    other = mf.Store.open(tmp_path / "s")  # its now is past every commit: the window ends

    def sweep() -> None:
        other.compact(min_rows=2)
        other.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=0.001,
                     wait_seconds=0)

    real = diff_module.StoreDiff._read

    def read(self, table):  # noqa: ANN001, ANN202
        if table == "capsules":
            sweep()  # after the parts to read were chosen, before they are read
        return real(self, table)

    monkeypatch.setattr(diff_module.StoreDiff, "_read", read)
    with pytest.raises(mf.errors.GenerationNotFoundError, match="no longer readable"):
        store.diff(1)
    monkeypatch.undo()
    store = mf.Store.open(tmp_path / "s", clock=TickingClock())
    store.ingest({"content": "three", "source": "s", "anchor": "a"})
    store.ingest({"content": "four", "source": "s", "anchor": "a"})
    changed = store.diff(store.generation - 2)
    sweep()
    with pytest.raises(mf.errors.GenerationNotFoundError, match="no longer readable"):
        changed.rows("capsules")


def test_generation_of_names_the_commit_that_wrote_each_row(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    [a] = store.ingest({"content": "one", "source": "s", "anchor": "a"})
    sid = store.session_start("team")
    store.record_recall([a])
    store.compact(None, min_rows=1)  # a rewrite keeps each row's seq and its origin
    store.session_finish(sid, "next: more")
    for table in CANONICAL_TABLES:
        for seq in store.table(table).collect().get_column("seq").to_list():
            g = store.generation_of(seq)
            assert seq in store.at(g).table(table).collect()["seq"].to_list(), (table, seq)
            assert seq not in store.at(g - 1).table(table).collect()["seq"].to_list()
    last = int(store.snapshot.counter("seq"))
    for bad in (0, last + 1, -3):
        with pytest.raises(mf.errors.InvalidInputError, match="no canonical row has seq"):
            store.generation_of(bad)
    with pytest.raises(mf.errors.InvalidInputError, match="integer"):
        store.generation_of("7")
    with pytest.raises(mf.errors.InvalidInputError, match="no canonical row"):
        store.at(1).generation_of(last)  # a row the older view does not hold


def test_the_json_written_in_pieces_is_the_json_of_the_whole(tmp_path, monkeypatch, capsys):
    from memframe import frames
    from memframe.cli import main

    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": str(i)}
                        for i in range(7)])
    store.forget(ids[2], mode="redact")
    store.relate(ids[0], ids[1], "supersedes")
    whole = store.diff(0).to_json()
    monkeypatch.setattr(frames, "JSON_ROWS", 2)  # a piece per two rows, a short last
    d = store.diff(0)
    assert len(list(d.json_pieces())) > 6
    assert d.to_json() == whole
    assert json.loads(whole)["capsules"][0]["id"] == ids[0]
    assert main(["diff", str(store.path), "--since", "0", "--format", "json"]) == 0
    assert capsys.readouterr().out == whole + "\n"


def test_both_ends_read_the_kept_state_they_share_once(tmp_path):
    # the two ends of a diff with no cycle between keep the same state runs: their stored
    # rows are read once (a diff of scattered changes at 10M read them twice, 823k rows)
    from memframe.digest.state import digest_capsules

    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": f"a{i}"} for i in range(40)])
    store.memory.run_cycle()
    since = store.generation
    store.record_recall(["cap-3", "cap-30"])
    store.ingest({"content": "new", "source": "s", "anchor": "n"})
    numbers = [3, 30, 41]
    stored_rows = digest_capsules.state_runs().runs.plan(store.pinned(), numbers).rows
    assert stored_rows > 0
    alone = [v.memory.kept_state_of(numbers) for v in (store.at(since), store.pinned())]
    shared: dict = {}
    together = [v.memory.kept_state_of(numbers, shared) for v in (store.at(since), store.pinned())]
    for (a, _), (t, _) in zip(alone, together, strict=True):
        assert t.equals(a)
    assert together[0][1] == alone[0][1]
    assert together[1][1] == alone[1][1] - stored_rows  # the second end read none of them
    d = store.diff(since)
    assert set(d.capsules.get_column("id")) == {"cap-3", "cap-30", "cap-41"}
    check_diff(store, since)
