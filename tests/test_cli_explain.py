"""`memframe explain STORE CAP-ID`: the API's rows as a table, JSON or an escaped page."""

from __future__ import annotations

import json

import pytest

import memframe as mf
from memframe.cli import main


@pytest.fixture
def small(tmp_path, clock):
    store = mf.Store.create(tmp_path / "small", clock=clock)
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                   "project_id": "team/api" if i % 2 else "ops"} for i in range(12)])
    store.ingest([{"content": "ACTIVE(<script>\x1b[2J\u202e): resume " + w,
                   "source": "s", "anchor": "a", "project_id": "ops"} for w in ("a", "b")])
    return store


@pytest.fixture
def terminal(monkeypatch):
    """Pretend stdout is an 80-column terminal."""
    from memframe import cli

    monkeypatch.setattr(cli, "_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")


def test_piped_json_is_the_api_s_rows(small, capsys):
    assert main(["explain", str(small.path), "cap-1", "--headlines", "3", "--quiet"]) == 0
    body = json.loads(capsys.readouterr().out)
    frame = mf.explain(small, "cap-1", headlines=3)
    assert body == {"id": "cap-1", "headlines": 3, "project_prefix": None,
                    "sections": frame.to_dicts()}
    newest = next(r for r in body["sections"] if r["section"] == "newest")
    assert newest == {"section": "newest", "listed": False, "rank": 14,
                      "reason": "rank 14 past headlines 3 (raise headlines)"}


def test_on_a_terminal_a_table_of_80_columns_with_stored_text_made_visible(small, capsys,
                                                                           terminal):
    assert main(["explain", str(small.path), "cap-13", "--project-prefix", "ops"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "why cap-13 is or is not in each list of the digest (headlines 10, prefix ops)"
    assert lines[1].split() == ["section", "listed", "rank", "reason"]
    assert all(len(line) <= 80 for line in lines), [ln for ln in lines if len(ln) > 80]
    assert "\x1b" not in out and "\u202e" not in out and "a newer handoff cap-14 holds" in out
    assert any(line.startswith("newest         yes       2  listed at rank 2") for line in lines)


def test_html_escapes_stored_content(small, capsys):
    assert main(["explain", str(small.path), "cap-13", "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert page.startswith("<!DOCTYPE html>") and "<script>" not in page
    assert "thread &quot;&lt;script&gt;" in page and "\x1b" not in page


def test_an_unknown_id_and_a_bad_prefix_exit_1_with_the_fix(small, capsys):
    assert main(["explain", str(small.path), "cap-99"]) == 1
    err = capsys.readouterr().err
    assert "capsule 'cap-99' is not in this store (ids run cap-1..cap-14)" in err
    assert main(["explain", str(small.path), "cap-1", "--project-prefix", "ops/"]) == 1
    assert "ends with the subtree separator" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["explain", str(small.path), "cap-1", "--headlines", "-2"])
    assert usage.value.code == 2 and "non-negative integer" in capsys.readouterr().err
