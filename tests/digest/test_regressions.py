"""Histories that once made the warm digest differ from the reference, kept as tests."""

from __future__ import annotations

import json

import memframe as mf
from tests.conftest import TickingClock


def _ids(body: dict, section: str) -> list[str]:
    return [row["id"] for row in body.get(section, [])]


def test_a_ratified_leader_whose_text_is_read_is_listed_once(tmp_path):
    # staged, recalled, a cycle; ratified, a cycle: the leaders of both lists named the
    # capsule, its text was read from the capsules once per list, and the join repeated it
    s = mf.Store.create(tmp_path / "s", clock=TickingClock())
    [a] = s.ingest([{"content": "first", "source": "cli", "anchor": "a:1", "project_id": "p"}])
    s.ingest({"content": "second", "source": "cli", "anchor": "a:1", "project_id": "p"})
    s.review(a, "proposed")
    s.record_recall([a])
    s.memory.run_cycle()
    s.review(a, "ratified", reason="checked")
    s.memory.run_cycle()
    warm, full = mf.digest(s).to_json(), mf.digest(s, verify="full").to_json()
    body = json.loads(warm)
    assert _ids(body, "newest") == ["cap-2", a]
    assert _ids(body, "most_recalled") == [a]
    assert warm == full
