"""The vocabulary holds words and code identifiers, never ids, hashes or numbers; it is
the same whether content is tokenised in one slice or many."""

from __future__ import annotations

import io
import sys

import polars as pl
import pytest

import memframe as mf
from memframe.audit import id_like, vocabulary
from memframe.audit import misses as M

UUID = "8afe12cd-ca9e-4abc-8def-0123456789ab"


def _state(contents: list[str], status: list[str] | None = None) -> pl.DataFrame:
    return pl.DataFrame({"id": [f"cap-{i}" for i in range(len(contents))],
                         "status": status or ["live"] * len(contents), "content": contents})


@pytest.mark.parametrize("token", [
    "cap-12", "sess-3", "node_7", "v1.2.3", "3f9a2c1", "0123456789ab", "8afe", "ca9e",
    "2026", "2026-05-04", "250ms", "10x", "4.2gb", "legacy/659020", "utf-8",
    "a1b2c3d4e5f6g7h8i9",
])
def test_id_like_tokens(token):
    assert pl.select(id_like(pl.lit(token))).item() is True


@pytest.mark.parametrize("token", [
    "cafe", "retrieval", "co-op", "e.g", "retrieval_cache", "retrievalcache", "schema_v2",
    "e2e", "sha256", "utf8", "k8s", "ec2", "zurich", "façade", "cache.get", "get_user_id",
])
def test_words_and_identifiers_are_not_id_like(token):
    assert pl.select(id_like(pl.lit(token))).item() is False


def test_uuid_fragments_never_become_words():
    # "cafe" sits inside the UUID's hex; only the plain-text "Café" is a word
    state = _state([f"see conv:{UUID}#2 and commit 3f9a2c1 for cap-12 (sess-3)",
                    f"trace {UUID.replace('8afe', 'cafe')}", "Café tonight, 250ms p99"])
    vocab = dict(vocabulary(state).rows())
    assert vocab == {"see": 1, "conv": 1, "and": 1, "commit": 1, "for": 1, "cap": 1,
                     "sess": 1, "trace": 1, "cafe": 1, "tonight": 1, "p99": 1}


def test_mixed_case_and_diacritics_fold_into_one_word():
    state = _state(["Kubernetes KUBERNETES kubernetes", "Zürich", "zurich ZÜRICH", "naïve"])
    assert vocabulary(state).rows() == [("kubernetes", 1), ("naive", 1), ("zurich", 2)]


def test_slices_do_not_change_the_counts(monkeypatch):
    words = ["retrieval", "Cache", "café", "schema_v2", "co-op", "retrievalCache"]
    contents = [" ".join(words[j % len(words)] for j in range(i % 7 + 1)) + f" cap-{i}"
                for i in range(3000)]
    whole = vocabulary(_state(contents))
    monkeypatch.setattr(M, "_SLICE_ROWS", 1000)
    monkeypatch.setattr(pl, "thread_pool_size", lambda: 8)  # 16 slices of 1,875 rows
    many = vocabulary(_state(contents * 10))
    assert many.get_column("token").to_list() == whole.get_column("token").to_list()
    assert (many.get_column("capsules") == whole.get_column("capsules") * 10).all()


def test_only_live_capsules_count():
    state = _state(["alpha beta", "beta gamma", "gamma delta"],
                   ["live", "tombstoned", "live"])
    assert vocabulary(state).rows() == [("alpha", 1), ("beta", 1), ("delta", 1), ("gamma", 1)]


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_goes_to_stderr_only_on_a_terminal(tmp_path, monkeypatch, capsys):
    store = mf.Store.create(tmp_path / "s")
    store.ingest({"content": "the retrieval lane", "source": "note", "anchor": "a"})
    store.record_miss(["retreival"], "abstain")
    mf.audit.recall_misses(store)  # stderr is captured: not a terminal
    assert capsys.readouterr().err == ""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    audit = mf.audit.recall_misses(store)
    assert "audit" in terminal.getvalue()
    quiet = _Terminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert mf.audit.recall_misses(store, progress=False).to_json() == audit.to_json()
    assert quiet.getvalue() == ""
