"""Erased content leaves no trace in the digest's derived state (issue 21, fault 1).

A capsule forgotten with ``mode="redact"`` or ``"purge"`` had its headline and ACTIVE()
label copied into the digest's derived tables (the state runs, the subset, the leaders,
the kept sections), in values and in Parquet min/max statistics, and they survived later
cycles and merges. After the forget, a cycle and a vacuum, no file under the store may
hold the content, its headline or its label: every byte of every file is searched (the
Parquet footers and their statistics included), and every text value of every Parquet
file is decoded and searched too (data pages are compressed, so raw bytes alone could
miss a value).
"""

from __future__ import annotations

import datetime as dt

import polars as pl
import pyarrow.parquet as pq
import pytest

import memframe as mf
from tests.digest.conftest import T0, Clock, dig, put

# distinctive words: each needle appears in nothing else the test writes
LABELS = {"purge": "quokkathread", "redact": "zebrathread"}
SECRETS = {"purge": "heliotrope launch code 9931", "redact": "marzipan vault code 4471"}


def _content(mode: str) -> str:
    return f"ACTIVE({LABELS[mode]}): {SECRETS[mode]}\nsecond line of the erased note"


def _needles(mode: str) -> list[bytes]:
    text = _content(mode)
    # the content, the label, the headline's prefix and the secret on its own
    return [text.encode(), LABELS[mode].encode(), text[:24].encode(), SECRETS[mode].encode()]


def _hits(root, needles: list[bytes]) -> list[str]:
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        name = str(path.relative_to(root))
        found += [f"{name}: raw {n!r}" for n in needles if n in data]
        if path.suffix == ".parquet":
            table = pq.read_table(path)
            for column in table.column_names:
                for value in table.column(column).to_pylist():
                    if isinstance(value, str):
                        found += [f"{name}: {column} holds {n!r}" for n in needles
                                  if n.decode() in value]
    return found


def _build(store, rounds: int) -> None:
    """Plain notes, thread handoffs and pinned, recalled capsules over several cycles, so
    that the state's runs merge and the leaders and kept sections are rewritten."""
    for r in range(rounds):
        for i in range(12):
            put(store, f"plain note {r}-{i}")
        put(store, f"ACTIVE(other{r}): step {r}")
        mf.digest(store)  # the warm path reads what the cycle kept
        store.memory.run_cycle()


@pytest.mark.parametrize("mode", ["purge", "redact"])
def test_erased_content_leaves_no_derived_trace(tmp_path, mode):
    store = mf.Store.create(tmp_path / "store", clock=Clock(step=dt.timedelta(minutes=1)))
    _build(store, 3)
    also = put(store, f"ACTIVE({LABELS[mode]}): an older step of the same thread")
    secret = put(store, _content(mode))
    store.pin(secret)
    store.record_recall([secret] * 5)
    store.classify(secret, "epic")
    store.relate(also, secret, "blocks")
    store.memory.run_cycle()
    _build(store, 3)  # the secret's rows travel through later cycles and merges
    before = dig(store)
    assert any(row["id"] == secret for row in before["handoff"])  # it was kept, shown
    assert _hits(store.path, _needles(mode))  # the test can see a copy

    with store.transaction():
        store.forget(also, mode=mode, reason="pii")
        store.forget(secret, mode=mode, reason="pii")
    # right after the forget's commit: the replaced files vacuumed, nothing is left
    store.vacuum(grace_seconds=1)
    assert _hits(store.path, _needles(mode)) == []
    _check_digest(store, secret, mode)
    # nor through the cycles and merges that follow
    store.memory.run_cycle()
    _check_digest(store, secret, mode)
    _build(store, 2)
    store.vacuum(grace_seconds=1)
    assert _hits(store.path, _needles(mode)) == []
    _check_digest(store, secret, mode)


def _check_digest(store, secret: str, mode: str) -> None:
    """The digest still answers, warm == full (fenced too), and shows nothing of the
    erased capsule."""
    for prefix in (None, "nmemory"):
        warm = dig(store, project_prefix=prefix)
        assert warm == dig(store, project_prefix=prefix, verify="full")
        assert secret not in str(warm) and LABELS[mode] not in str(warm)
        assert any(row["id"].startswith("cap-") for row in warm["handoff"])


def test_digest_reads_text_of_emitted_rows_only(tmp_path):
    """Headlines the derived state no longer holds are read for the rows emitted."""
    store = mf.Store.create(tmp_path / "store", clock=Clock())
    ids = [put(store, f"note {i}\nmore") for i in range(40)]
    store.record_recall([ids[3]] * 9)
    store.memory.run_cycle()
    store.record_recall([ids[5]] * 20)  # an old capsule touched above the watermark
    body = dig(store, headlines=3)
    assert body == dig(store, headlines=3, verify="full")
    assert body["most_recalled"][0]["id"] == ids[5]
    assert body["most_recalled"][0]["headline"] == "note 5…"
    assert T0 is not None


# -- what an erasure keeps of the text tables ---------------------------------------------

SUBSET_TEXT = "projections/text/digest_subset"
LEADERS = "projections/text/digest_leaders"
SECTIONS = "projections/text/digest_sections"


def _rows(view, table: str):
    return pl.concat([pl.read_parquet(view.path / p.path) for p in view.partitions(table)],
                     how="vertical") if view.partitions(table) else None


def _number(cid: str) -> int:
    return int(cid.split("-")[1])


@pytest.mark.parametrize("mode", ["purge", "redact"])
def test_an_erased_leader_in_the_subset_leaves_the_other_rows_of_the_text_tables(
        tmp_path, mode):
    """The erased capsule is the newest, the most recalled and a pinned thread: its rows
    leave the leaders and the subset's text (the other rows stay, in order), the kept
    sections that name it are dropped, and no file holds its text once vacuumed."""
    store = mf.Store.create(tmp_path / "store", clock=Clock(step=dt.timedelta(minutes=1)))
    _build(store, 2)
    secret = put(store, _content(mode))
    store.pin(secret)
    store.record_recall([secret] * 5)
    store.memory.run_cycle()
    view = store.pinned()
    before = {t: _rows(view, t) for t in (SUBSET_TEXT, LEADERS)}
    gone = pl.col("num") == _number(secret)
    assert all(frame.filter(gone).height for frame in before.values())  # a leader, a member
    assert before[LEADERS].filter(gone & pl.col("headline").is_not_null()).height == 2
    assert view.partitions(SECTIONS)

    store.forget(secret, mode=mode, reason="pii")
    view = store.pinned()
    for table, frame in before.items():
        assert _rows(view, table).equals(frame.filter(~gone)), table
    # every leaders row group but the last still holds 16 rows: the reader reads it as before
    (part,) = view.partitions(LEADERS)
    assert pq.ParquetFile(view.path / part.path).metadata.row_group(0).num_rows == 16
    assert not view.partitions(SECTIONS)  # they name the erased capsule
    store.vacuum(grace_seconds=1)
    assert _hits(store.path, _needles(mode)) == []
    _check_digest(store, secret, mode)
    store.memory.run_cycle()
    _check_digest(store, secret, mode)
    assert _hits(store.path, _needles(mode)) == []


def test_an_erasure_keeps_the_kept_sections_that_do_not_name_the_capsule(tmp_path):
    store = mf.Store.create(tmp_path / "store", clock=Clock(step=dt.timedelta(minutes=1)))
    _build(store, 2)
    plain = put(store, "a plain note with a heliotrope secret\nand more")
    store.memory.run_cycle()
    sections = store.pinned().partitions(SECTIONS)
    named = _rows(store.pinned(), SECTIONS).get_column("names").str.split(" ").explode() \
        .cast(pl.Int64, strict=False).drop_nulls().to_list()
    assert sections and named and _number(plain) not in named
    store.forget(plain, mode="purge")
    view = store.pinned()
    assert view.partitions(SECTIONS) == sections  # the very same files
    assert _rows(view, LEADERS).filter(pl.col("num") == _number(plain)).height == 0
    store.vacuum(grace_seconds=1)
    assert _hits(store.path, [b"heliotrope"]) == []
    assert dig(store) == dig(store, verify="full")
    store.memory.run_cycle()
    assert dig(store) == dig(store, verify="full")


def _digest_rows_visited(report) -> int:
    return sum(report.projections[name]["rows_visited"]
               for name in ("digest_capsules", "digest_sections"))


def test_the_cycle_after_an_erasure_refills_nothing(tmp_path):
    """The cycle after an erasure reads what the cycle after a tombstone of a like
    capsule reads (the touched state rows' group and the stored text tables), not every
    state row to refill the text tables (6,000 here: more than a state row group)."""
    store = mf.Store.create(tmp_path / "store", clock=Clock(step=dt.timedelta(minutes=1)))
    store.ingest([{"content": f"plain note {i}\nmore", "source": "note", "anchor": "a",
                   "project_id": "nmemory"} for i in range(6_000)])
    threads = [put(store, f"ACTIVE(t{i}): step {i}") for i in range(4)]
    store.pin(threads[0])
    store.record_recall(threads[:2])
    store.memory.run_cycle()
    hidden = put(store, "newest but one")
    erased = put(store, "newest: a leader")
    store.memory.run_cycle()

    store.forget(hidden)  # a tombstone: the text tables keep every row
    tombstone = store.memory.run_cycle()
    store.forget(erased, mode="purge")
    erasure = store.memory.run_cycle()
    assert 0 < _digest_rows_visited(erasure) <= _digest_rows_visited(tombstone) + 64
    assert _digest_rows_visited(erasure) < 6_000
    assert dig(store) == dig(store, verify="full")


def test_the_text_tables_name_their_capsule_in_the_column_the_store_filters():
    """The store drops an erased capsule's rows by `TEXT_KEY`; the digest's text tables
    must key their rows by that very column (and the kept sections list `TEXT_NAMES`)."""
    from memframe.digest.state import digest_leaders, digest_subset, sections
    from memframe.store import derived

    assert derived.TEXT_KEY in digest_subset.TEXT_SCHEMA
    assert derived.TEXT_KEY in digest_leaders.LEADERS_SCHEMA
    assert derived.TEXT_NAMES in sections.SCHEMA and derived.TEXT_KEY not in sections.SCHEMA
