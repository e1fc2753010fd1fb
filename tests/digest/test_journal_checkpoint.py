"""The journal's verified checkpoint: a warm digest verifies what is new and confirms that
the verified parts are the very files that were verified; every tampering answers exactly
what the full walk answers, with and without a checkpoint."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Callable

import polars as pl
import pyarrow.parquet as pq
import pytest
from conftest import T0, put

import memframe as mf
from memframe.derived import read_whole
from memframe.digest.state import journal
from memframe.errors import InvalidInputError
from memframe.store import fingerprint
from tests.conftest import verify_chain as reference_walk

NOW = T0.replace(year=2027)


def build(store, *, checkpoint: bool) -> None:
    """Six commits (one journal part each), the checkpoint (or not), then three more."""
    ids = [put(store, f"note {i}") for i in range(4)]
    store.relate(ids[1], ids[0], "supersedes")
    store.forget(ids[2])
    if checkpoint:
        store.memory.run_cycle()
    put(store, "after the checkpoint")
    store.session_start("nmemory")
    put(store, "last one")


def journal_of(store) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in store.pinned().files("journal")])


def chain(store, verify: str = "incremental") -> dict:
    section = mf.digest(store, now=NOW, verify=verify).to_dict()["journal"]
    section.pop("out_of_band")
    return section


def expected(store) -> dict:
    ok, value = reference_walk(journal_of(store))
    return {"chain": "ok", "verified": value} if ok else {"chain": "broken", "broken_seq": value}


def part_holding(store, audit_seq: int):
    for path in store.pinned().files("journal"):
        if audit_seq in pl.read_parquet(path, columns=["audit_seq"])["audit_seq"].to_list():
            return path
    raise AssertionError(f"no part holds audit_seq {audit_seq}")


def _encode(frame: pl.DataFrame, size: int | None) -> bytes:
    buf = io.BytesIO()
    table = frame.to_arrow()  # written as the store writes parts (smaller: no arrow schema)
    pq.write_table(table, buf, compression="zstd", store_schema=size is None,
                   write_statistics=[c for c in table.column_names if c != "reason"])
    data = buf.getvalue()
    if size is None:
        return data
    assert len(data) <= size, "the tampered part came out larger than the original"
    # pad between the data and the footer: readers find the footer from the end
    footer = int.from_bytes(data[-8:-4], "little")
    cut = len(data) - 8 - footer
    padded = data[:cut] + b"\0" * (size - len(data)) + data[cut:]
    assert pl.read_parquet(io.BytesIO(padded)).height == frame.height
    return padded


def rewrite(path, edit: Callable[[pl.DataFrame], pl.DataFrame], how: str) -> None:
    """Rewrite a part under its own name: ``replace`` (a new file renamed over it) or
    ``in_place`` (same inode, same size, mtime restored)."""
    st = os.stat(path)
    frame = edit(pl.read_parquet(path))
    if how == "replace":
        tmp = path.with_name(".tamper")
        tmp.write_bytes(_encode(frame, None))
        os.replace(tmp, path)
        return
    data = _encode(frame, st.st_size)
    with open(path, "r+b") as fh:
        fh.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (st.st_ino, st.st_size,
                                                                 st.st_mtime_ns)


def set_where(column: str, seq: int, value) -> Callable[[pl.DataFrame], pl.DataFrame]:
    def edit(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.with_columns(
            pl.when(pl.col("audit_seq") == seq).then(pl.lit(value, dtype=frame[column].dtype))
            .otherwise(pl.col(column)).alias(column))
    return edit


def drop_row(seq: int) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda frame: frame.filter(pl.col("audit_seq") != seq)


def renumber(seq: int) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda frame: frame.with_columns(
        pl.when(pl.col("audit_seq") >= seq).then(pl.col("audit_seq") + 10)
        .otherwise(pl.col("audit_seq")).alias("audit_seq"))


# (name, edit, audit_seq touched, broken_seq the full walk reports)
TAMPERS = [
    ("edited old row", lambda s: set_where("action", s, "memory_forget"), 2, 2),
    ("edited reason", lambda s: set_where("reason", s, "because"), 1, 1),
    ("forged hash", lambda s: set_where("chained_hash", s, "0" * 64), 3, 3),
    ("deleted interior row", drop_row, 2, 3),
    ("renumbered rows", renumber, 4, 5),
]


@pytest.mark.parametrize("checkpoint", [True, False], ids=["checkpoint", "no-checkpoint"])
@pytest.mark.parametrize("how", ["replace", "in_place"])
@pytest.mark.parametrize("name,edit,seq,broken", TAMPERS, ids=[t[0] for t in TAMPERS])
def test_tampered_old_part_answers_as_the_full_walk(store, checkpoint, how, name, edit, seq,
                                                    broken):
    build(store, checkpoint=checkpoint)
    assert chain(store) == chain(store, "full") == expected(store)
    assert chain(store)["chain"] == "ok"
    time.sleep(0.02)  # a rewrite in the same change-time tick would be racy (see fingerprint.RACY_NS)
    rewrite(part_holding(store, seq), edit(seq), how)
    want = {"chain": "broken", "broken_seq": broken}
    assert expected(store) == want
    assert chain(store) == chain(store, "full") == want
    d = mf.digest(store, now=NOW)
    assert d.to_json() == mf.digest(store, now=NOW, verify="full").to_json()


def shift_into_checkpoint(seq: int) -> Callable[[pl.DataFrame], pl.DataFrame]:
    return lambda frame: frame.with_columns(
        pl.when(pl.col("audit_seq") >= seq).then(pl.col("audit_seq") - 3)
        .otherwise(pl.col("audit_seq")).alias("audit_seq"))


@pytest.mark.parametrize("name,edit,offset,walked", [
    ("edited new row", lambda s: set_where("subject", s, "cap-99"), 0, "incremental"),
    ("forged new hash", lambda s: set_where("chained_hash", s, "f" * 64), 1, "incremental"),
    ("deleted new row", drop_row, 0, "incremental"),
    ("renumbered into the checkpoint", shift_into_checkpoint, 0, "full"),
])
def test_tampered_rows_above_the_checkpoint(store, name, edit, offset, walked):
    build(store, checkpoint=True)
    first_new = journal.watermark_of(store.pinned())["audit_seq"] + 1
    seq = first_new + offset
    rewrite(part_holding(store, seq), edit(seq), "replace")
    check = journal.check_chain(store.pinned())
    assert check.walked == walked and check.section["chain"] == "broken"
    assert chain(store) == chain(store, "full")
    if walked == "incremental":  # no duplicate audit seqs: the plain reading applies
        assert chain(store) == expected(store) == {"chain": "broken", "broken_seq": (
            first_new + 1 if name == "deleted new row" else seq)}
    else:
        assert chain(store)["broken_seq"] == first_new - 3


def test_warm_check_reads_only_new_rows_and_never_hashes_trusted_parts(store, monkeypatch):
    monkeypatch.setattr(fingerprint, "RACY_NS", 0)  # trust identities at once (no 2 s wait in a test)
    build(store, checkpoint=True)
    view = store.pinned()
    mark = journal.watermark_of(view)
    recorded = view.row_count(journal.TABLE)
    new_rows = view.row_count("journal") - mark["verified"]
    assert new_rows == 3 and recorded == 6

    def no_hashing(*_a, **_k):
        raise AssertionError("a trusted part was hashed")

    monkeypatch.setattr(fingerprint.hashlib, "file_digest", no_hashing)
    check = journal.check_chain(view)
    assert check.walked == "incremental" and check.reason is None
    # the seal (every trusted identity hashed together, in the watermark) confirms the
    # recorded parts with one stat each: no checkpoint row is read
    assert mark["seal"]["racy"] == [] and check.rows_visited == new_rows
    assert check.section == {"chain": "ok", "verified": view.row_count("journal")}

    class Unsealed:  # a checkpoint recorded before seals: its rows are read
        def __getattr__(self, name):
            return getattr(view, name)

        @property
        def watermarks(self):
            return {**view.watermarks, journal.WATERMARK: {**mark, "seal": None}}

    check = journal.check_chain(Unsealed())
    assert check.walked == "incremental" and check.rows_visited == recorded + new_rows


def test_racy_identity_is_confirmed_by_bytes(store, monkeypatch):
    monkeypatch.setattr(fingerprint, "RACY_FINE_NS", 10**19)  # a window no test outruns
    build(store, checkpoint=True)  # parts recorded within their racy window
    rows, _ = read_whole(store.pinned(), journal.TABLE, journal.CHECKPOINT_SCHEMA)
    assert rows["ctime_ns"].null_count() == rows.height
    hashed = []
    real = fingerprint.hashlib.file_digest
    monkeypatch.setattr(fingerprint.hashlib, "file_digest", lambda fh, algo: hashed.append(1) or
                        real(fh, algo))
    assert journal.check_chain(store.pinned()).walked == "incremental"
    assert len(hashed) == rows.height


def test_a_copied_store_is_sealed_again_by_its_next_cycle(store, tmp_path, monkeypatch):
    """A copy of the store (a backup restored, a clone) gives every journal part a new
    inode and change time: the seal fails and each digest confirms the parts by their
    bytes. The next cycle, even with nothing new to verify, records the parts' identities
    again, so the digests after it stat the parts instead of hashing them."""
    import shutil

    monkeypatch.setattr(fingerprint, "RACY_NS", 0)
    build(store, checkpoint=True)
    store.memory.run_cycle()
    copy = tmp_path / "copy"
    shutil.copytree(store.path, copy)
    clone = mf.Store.open(copy)
    assert not journal.is_sealed(clone.pinned(), journal.watermark_of(clone.pinned()))
    hashed = []
    real = fingerprint.hashlib.file_digest
    monkeypatch.setattr(fingerprint.hashlib, "file_digest", lambda fh, algo: hashed.append(1) or
                        real(fh, algo))
    assert journal.check_chain(clone.pinned()).walked == "incremental" and hashed
    before = chain(clone)
    clone.memory.run_cycle()
    view = clone.pinned()
    assert journal.is_sealed(view, journal.watermark_of(view))
    hashed.clear()
    check = journal.check_chain(view)
    assert check.walked == "incremental" and not hashed and check.rows_visited == 0
    assert chain(clone) == before == expected(clone)


def test_a_rewrite_keeping_name_size_and_mtime_is_caught_by_its_change_time(store,
                                                                            monkeypatch):
    monkeypatch.setattr(fingerprint, "RACY_NS", 0)
    build(store, checkpoint=True)
    time.sleep(0.05)
    rewrite(part_holding(store, 2), set_where("subject", 2, "cap-9"), "in_place")
    check = journal.check_chain(store.pinned())
    assert check.walked == "full" and "not the file that was verified" in check.reason
    assert check.section == {"chain": "broken", "broken_seq": 2} == expected(store)


def test_a_removed_part_walks_in_full(store):
    build(store, checkpoint=True)
    path = part_holding(store, 1)
    path.unlink()
    with pytest.raises(mf.MemframeError):
        chain(store)  # a part the generation names is gone: the digest fails closed


def test_compaction_walks_in_full_until_the_next_cycle_records_again(store):
    build(store, checkpoint=True)
    store.compact("journal")
    check = journal.check_chain(store.pinned())
    assert check.walked == "full" and "no longer in the generation" in check.reason
    assert check.section == expected(store) == chain(store, "full")
    report = store.memory.run_cycle()
    assert report.projections["digest"]["rows_written"] == 1
    assert journal.check_chain(store.pinned()).walked == "incremental"
    assert chain(store) == expected(store)


def _merged_after_a_first_part(store) -> tuple[int, int]:
    """A first journal part of three rows, six one-row parts after it, the checkpoint, then
    a compaction that merges the six (``min_rows=2``: the first is not small). Returns the
    merged part's audit range."""
    store.ingest([{"content": f"bulk {i}", "source": "note", "anchor": "b",
                   "project_id": "nmemory"} for i in range(3)])
    for i in range(6):
        put(store, f"single {i}")
    store.memory.run_cycle()
    merged = store.compact("journal", min_rows=2)
    assert merged == {"journal": 6}
    return 4, 9


def test_a_compaction_walks_again_only_from_the_last_verified_part_before_it(store):
    lo, hi = _merged_after_a_first_part(store)
    check = journal.check_chain(store.pinned())
    assert check.walked == "incremental" and check.reason
    assert "no longer in the generation" in check.reason
    assert [row["audit_hi"] for row in check.recorded] == [lo - 1]  # the first part kept
    assert check.section == expected(store) == chain(store, "full") == chain(store)
    # read: the six merged rows, the row group holding the kept part's last row, and the
    # checkpoint's rows; not the whole chain walked again
    recorded = read_whole(store.pinned(), journal.TABLE, journal.CHECKPOINT_SCHEMA)[0]
    assert check.rows_visited == (hi - lo + 1) + 3 + recorded.height
    report = store.memory.run_cycle()  # records it again, in one piece
    assert report.projections["digest"]["rows_written"] == 1
    again = journal.check_chain(store.pinned())
    assert again.walked == "incremental" and again.reason is None
    assert chain(store) == expected(store)


def test_a_tampered_merged_part_answers_what_the_full_walk_answers(store):
    lo, _hi = _merged_after_a_first_part(store)
    rewrite(part_holding(store, lo + 2), set_where("actor", lo + 2, "mallory"), "replace")
    check = journal.check_chain(store.pinned())
    assert check.section == {"chain": "broken", "broken_seq": lo + 2} == expected(store)
    assert chain(store) == chain(store, "full") == check.section


def test_a_tampered_first_part_is_not_rewound_to(store):
    lo, _hi = _merged_after_a_first_part(store)
    rewrite(part_holding(store, 2), set_where("actor", 2, "mallory"), "replace")
    check = journal.check_chain(store.pinned())
    assert check.walked == "full"  # nothing verified is left to walk from
    assert check.section == {"chain": "broken", "broken_seq": 2} == expected(store)
    assert chain(store) == check.section


def test_cycle_records_nothing_for_a_broken_chain(store):
    build(store, checkpoint=True)
    mark = journal.watermark_of(store.pinned())
    first_new = mark["audit_seq"] + 1
    rewrite(part_holding(store, first_new), set_where("chained_hash", first_new, "0" * 64),
            "replace")
    report = store.memory.run_cycle()
    assert journal.watermark_of(store.pinned()) == mark
    assert report.projections["digest"]["rows_written"] == 0
    assert chain(store) == {"chain": "broken", "broken_seq": first_new}


def test_checkpoint_advances_and_time_travel_answers_exactly(store):
    build(store, checkpoint=True)
    store.memory.run_cycle()
    g = store.generation
    put(store, "later")
    assert journal.watermark_of(store.pinned())["verified"] == journal.watermark_of(store.at(g))["verified"]
    for view in (store.pinned(), store.at(g), store.at(3), store.at(g - 1)):
        assert (mf.digest(view, now=NOW).to_json()
                == mf.digest(view, now=NOW, verify="full").to_json())


def test_checkpoint_table_is_folded_into_one_part_when_it_grows(store):
    put(store, "first")
    for i in range(journal.MAX_CHECKPOINT_PARTS + 2):
        store.memory.run_cycle()
        put(store, f"more {i}")
    assert len(store.pinned().snapshot.parts(journal.TABLE)) <= journal.MAX_CHECKPOINT_PARTS
    store.memory.run_cycle()
    assert journal.check_chain(store.pinned()).walked == "incremental"
    assert chain(store) == expected(store)


def test_rebuild_door_walks_in_full_and_records_every_part(store):
    build(store, checkpoint=False)
    store.memory.rebuild_projections()
    view = store.pinned()
    assert view.row_count(journal.TABLE) == len(view.snapshot.parts("journal"))
    assert journal.watermark_of(view)["verified"] == view.row_count("journal")


def test_verify_is_validated(store):
    with pytest.raises(InvalidInputError, match='verify must be "incremental"'):
        mf.digest(store, verify="fast")


def test_virgin_store_verifies_zero_and_records_nothing(store):
    assert chain(store) == chain(store, "full") == {"chain": "ok", "verified": 0}
    store.memory.run_cycle()
    assert store.generation == 0


def test_cli_digest_advances_the_checkpoint_and_verify_full_gives_the_same_bytes(
        store, capsys):
    from memframe.cli import main

    build(store, checkpoint=False)
    assert main(["digest", str(store.path), "--no-advance"]) == 0
    assert journal.watermark_of(store.pinned()) is None
    plain = capsys.readouterr().out
    assert main(["digest", str(store.path)]) == 0
    warm = capsys.readouterr().out
    assert journal.watermark_of(store.pinned())["verified"] == store.row_count("journal")
    assert main(["digest", str(store.path), "--verify", "full"]) == 0
    full = capsys.readouterr().out
    assert plain == warm == full and json.loads(full)["journal"]["chain"] == "ok"
    g = store.generation
    assert main(["digest", str(store.path), "--as-of", str(g - 1)]) == 0  # frozen: no write
    assert store.generation == g


def test_fingerprinted_reads_give_each_file_its_own_rows(store, monkeypatch):
    """Parts read for a checkpoint are parsed together (hundreds of one-row parts under a
    stream of commits), each with its own rows and fingerprint, the same as one by one;
    a part whose rows are not what the log says is parsed alone (its own rows)."""
    build(store, checkpoint=False)
    view = store.pinned()
    parts = list(view.partitions("journal"))
    columns = list(journal.JOURNAL_COLUMNS)
    parses: list[int] = []
    real = pl.read_parquet
    monkeypatch.setattr(pl, "read_parquet", lambda source, **k: parses.append(
        len(source) if isinstance(source, list) else 1) or real(source, **k))

    def alone(part) -> pl.DataFrame:
        return pl.read_parquet(store.path / part.path, columns=columns).cast(
            {c: view.table("journal").collect_schema()[c] for c in columns})

    read = view.read_partitions_fingerprinted("journal", parts, columns)
    assert parses == [9]  # one parse for the nine files
    assert len(parts) == 9 and [f.height for f, _fp in read] == [p.rows for p in parts]
    for part, (frame, fp) in zip(parts, read, strict=True):
        assert frame.equals(alone(part))
        now = fingerprint.file_fingerprint(store.path / part.path)
        # the same bytes; the identity may be trusted by now (past its racy window)
        assert (fp["sha256"], fp["size"]) == (now["sha256"], now["size"])
        assert fp["ctime_ns"] in (None, now["ctime_ns"])
    time.sleep(0.02)
    rewrite(store.path / parts[3].path, lambda f: pl.concat([f, f]), "replace")
    read = view.read_partitions_fingerprinted("journal", parts, columns)
    assert [f.height for f, _fp in read] == [p.rows + (i == 3) for i, p in enumerate(parts)]
    for part, (frame, _fp) in zip(parts, read, strict=True):
        assert frame.equals(alone(part))


class _Stat:
    """The fields of a stat result the identity reads."""

    def __init__(self, ctime_ns: int) -> None:
        self.st_size, self.st_ino = 10, 7
        self.st_mtime_ns = self.st_ctime_ns = ctime_ns


@pytest.mark.parametrize(("ctime_ns", "window_ms"), [
    (1_733_400_000_123_456_789, 50),  # nanoseconds: the kernel's clock tick, with margin
    (1_733_400_000_120_000_000, 60),  # ten-millisecond stamps: plus that precision
    (1_733_400_000_000_000_000, 2000),  # whole seconds: a coarse file system
    (1_733_400_002_000_000_000, 2000),  # two-second stamps
])
def test_an_identity_is_trusted_once_past_its_file_systems_tick(ctime_ns, window_ms):
    """A rewrite in the same tick of the file system's clock keeps every field of a file's
    identity, so an identity is not trusted (only its size is kept; its bytes confirm it)
    until a tick has surely passed since its last change: a few milliseconds where change
    times are stamped to the nanosecond, two seconds where they are whole seconds."""
    window = window_ms * 1_000_000
    assert fingerprint.racy_window(ctime_ns) in range(window, window + 2_000_000)
    young = fingerprint._identity(_Stat(ctime_ns), ctime_ns + window - 1_000_000)
    old = fingerprint._identity(_Stat(ctime_ns), ctime_ns + window + 1_000_000)
    assert young == {"size": 10, "inode": None, "mtime_ns": None, "ctime_ns": None}
    assert old == {"size": 10, "inode": 7, "mtime_ns": ctime_ns, "ctime_ns": ctime_ns}
