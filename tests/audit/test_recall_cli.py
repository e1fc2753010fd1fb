"""`memframe audit recalls` and `memframe audit trust`: the API's reports on the command
line, in text, JSON and HTML, to stdout or to a file, stored text always escaped."""

from __future__ import annotations

import json

import pytest

import memframe as mf
from memframe.cli import main

HOSTILE = '<script>alert("x")</script>'


@pytest.fixture
def recalled(tmp_path, clock):
    store = mf.Store.create(tmp_path / "recalled", clock=clock)
    a, b, c = store.ingest([
        {"content": "deploys run on fridays", "source": "s", "anchor": "a", "project_id": "ops",
         "evidence_state": "inferred", "proof_hint": HOSTILE},
        {"content": "the cache is warm", "source": "s", "anchor": "b", "project_id": "team/api",
         "event_from": "2020-01-01T00:00:00Z", "event_to": "2020-02-01T00:00:00Z",
         "stale_if": HOSTILE},
        {"content": "never asked about", "source": "s", "anchor": "c", "project_id": "ops"}])
    store.record_recall([a], terms=["deploy day", HOSTILE])
    store.record_recall([a, b], terms=["cache"])
    store.record_recall([], terms=["rollback plan"])
    return store, (a, b, c)


def _run(capsys, *argv):
    assert main(list(argv)) == 0
    out = capsys.readouterr()
    assert out.err == ""
    return out.out


def test_recalls_json_is_the_api_report(recalled, capsys):
    store, (a, b, c) = recalled
    out = _run(capsys, "audit", "recalls", str(store.path), "--format", "json", "--quiet")
    assert out == mf.audit.recall_coverage(mf.Store.open(store.path)).to_json() + "\n"
    body = json.loads(out)
    assert body["totals"]["receipts"] == 3 and body["totals"]["hits"] == 2
    assert [row["id"] for row in body["never_recalled"]] == [c]
    fenced = json.loads(_run(capsys, "audit", "recalls", str(store.path), "--format", "json",
                             "--project-prefix", "team", "--quiet"))
    assert fenced["project_prefix"] == "team" and fenced["totals"]["receipts"] == 0


def test_trust_json_is_the_api_report(recalled, capsys):
    store, (a, b, _) = recalled
    out = _run(capsys, "audit", "trust", str(store.path), "--format", "json", "--quiet")
    assert out == mf.audit.trust(mf.Store.open(store.path)).to_json() + "\n"
    body = json.loads(out)
    assert [(r["id"], r["reasons"]) for r in body["recalled"]] == [(a, ["evidence inferred"])]
    assert {r["id"]: r["reason"] for r in body["expired"]} == {b: "event_to passed"}
    assert body["totals"] == {"recalled": 1, "recalls": 2, "expired": 1}


@pytest.mark.parametrize("command", ["recalls", "trust"])
def test_text_and_html_to_stdout_and_to_a_file(recalled, capsys, tmp_path, command):
    store, _ = recalled
    text = _run(capsys, "audit", command, str(store.path), "--format", "text", "--quiet")
    assert text.startswith({"recalls": "recall coverage", "trust": "trust audit"}[command])
    page = _run(capsys, "audit", command, str(store.path), "--format", "html", "--quiet")
    assert page.startswith("<!DOCTYPE html>")
    report = tmp_path / f"{command}.html"
    assert main(["audit", command, str(store.path), "--format", "html", "--out", str(report),
                 "--quiet"]) == 0
    assert report.read_text(encoding="utf-8").rstrip("\n") == page.rstrip("\n")


@pytest.mark.parametrize("command", ["recalls", "trust"])
def test_html_escapes_stored_text(recalled, capsys, command):
    store, _ = recalled
    page = _run(capsys, "audit", command, str(store.path), "--format", "html", "--quiet")
    assert "<script>" not in page
    assert "&lt;script&gt;" in page


def test_the_default_store_is_the_sample(capsys):
    from memframe.synth import sample_store_path

    body = json.loads(_run(capsys, "audit", "recalls", "--format", "json", "--quiet"))
    expected = mf.audit.recall_coverage(mf.Store.open(sample_store_path()))
    assert body["totals"]["never_recalled"] == expected.never_recalled.height > 0
    trust = json.loads(_run(capsys, "audit", "trust", "--format", "json", "--quiet"))
    assert trust["totals"]["recalled"] == mf.audit.trust(
        mf.Store.open(sample_store_path())).recalled.height > 0


def test_a_directory_as_out_is_refused(recalled, tmp_path, capsys):
    store, _ = recalled
    assert main(["audit", "trust", str(store.path), "--out", str(tmp_path), "--quiet"]) == 2
    assert "directory" in capsys.readouterr().err


def test_recalls_json_written_a_piece_at_a_time_is_the_api_report(recalled, capsys, tmp_path,
                                                                  monkeypatch):
    from memframe import frames

    store, _ = recalled
    monkeypatch.setattr(frames, "JSON_ROWS", 1)  # a piece per row
    report = mf.audit.recall_coverage(mf.Store.open(store.path))
    assert len(list(report.json_pieces())) > 10
    out = _run(capsys, "audit", "recalls", str(store.path), "--format", "json", "--quiet")
    assert out == report.to_json() + "\n"
    target = tmp_path / "coverage.json"
    assert main(["audit", "recalls", str(store.path), "--format", "json", "--out", str(target),
                 "--quiet"]) == 0
    assert target.read_text(encoding="utf-8") == out
    assert json.loads(out)["never_recalled"]
