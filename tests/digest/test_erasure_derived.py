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
