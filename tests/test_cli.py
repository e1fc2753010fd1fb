"""The command line: exit codes, streams, and that it calls the same API as Python."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import memframe as mf
from memframe.cli import main


@pytest.fixture
def small(tmp_path, clock):
    store = mf.Store.create(tmp_path / "small", clock=clock)
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                   "project_id": "team/api" if i % 2 else "ops"} for i in range(12)])
    return store


def test_digest_prints_the_same_bytes_as_the_api(small, capsys):
    assert main(["digest", str(small.path), "--headlines", "3"]) == 0
    out = capsys.readouterr().out
    assert out == mf.digest(mf.Store.open(small.path), headlines=3).to_json() + "\n"
    body = json.loads(out)
    assert len(body["newest"]) == 3 and body["newest_total"] == 12


def test_headlines_flag_in_both_forms_never_moves_the_total(small, capsys):
    for argv, shown in ((["--headlines=3"], 3), (["--headlines", "12"], 12), ([], 10)):
        assert main(["digest", str(small.path), *argv]) == 0
        body = json.loads(capsys.readouterr().out)
        assert (len(body["newest"]), body["total"]) == (shown, 12)


@pytest.mark.parametrize("form", [["--headlines", "ten"], ["--headlines=ten"]])
def test_non_numeric_headlines_exits_2_with_a_teaching_message(small, form):
    run = subprocess.run([sys.executable, "-m", "memframe", "digest", str(small.path), *form],
                         capture_output=True, text=True)
    assert run.returncode == 2
    assert "--headlines requires a non-negative integer" in run.stderr
    assert '"ten"' in run.stderr
    assert "usage: memframe digest" in run.stderr
    assert run.stdout == ""


def test_a_memframe_error_exits_1_with_the_message_and_no_traceback(tmp_path):
    run = subprocess.run([sys.executable, "-m", "memframe", "info", str(tmp_path / "nope")],
                         capture_output=True, text=True)
    assert run.returncode == 1
    assert "is not a memframe store" in run.stderr
    assert "Traceback" not in run.stderr
    bad = subprocess.run([sys.executable, "-m", "memframe", "digest", str(tmp_path / "nope"),
                          "--project-prefix", "nott/"], capture_output=True, text=True)
    assert bad.returncode == 1


def test_project_prefix_teaching_error_on_the_command_line(small, capsys):
    assert main(["digest", str(small.path), "--project-prefix", "team/"]) == 1
    err = capsys.readouterr().err
    assert 'project_prefix "team/" ends with the subtree separator' in err


def test_batch_digest_reports_a_failing_store_and_keeps_going(small, tmp_path, capsys):
    other = mf.Store.create(tmp_path / "other")
    out = tmp_path / "out"
    code = main(["digest", str(small.path), str(tmp_path / "missing"), str(other.path),
                 "--out", str(out), "--quiet"])
    assert code == 1
    assert sorted(p.name for p in out.iterdir()) == ["other.json", "small.json"]
    assert json.loads((out / "small.json").read_text())["total"] == 12
    assert "missing" in capsys.readouterr().err


def test_per_project_writes_one_fenced_digest_per_subtree_root(small, tmp_path):
    out = tmp_path / "per"
    assert main(["digest", str(small.path), "--per-project", "1", "--out", str(out)]) == 0
    from memframe.digest.batch import project_file_stem

    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(f"{project_file_stem(p)}.json" for p in ("ops", "team"))
    team = json.loads((out / f"{project_file_stem('team')}.json").read_text())
    assert team["total"] == 6
    assert team == json.loads(mf.digest(small, project_prefix="team").to_json())


def test_per_project_files_are_unique_and_bounded_whatever_the_ids(tmp_path, clock):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    ids = ["x/y", "x__y", "p" * 300, "../up", "ünï/cødé", "a b"]
    store.ingest([{"content": f"c{i}", "source": "s", "anchor": "a", "project_id": pid}
                  for i, pid in enumerate(ids)])
    out = tmp_path / "per"
    assert main(["digest", str(store.path), "--per-project", "9", "--out", str(out)]) == 0
    files = sorted(out.iterdir())
    assert len(files) == len(ids)  # no digest lost to a shared name
    assert all(len(f.name) <= 100 and f.parent == out for f in files)
    totals = sorted(json.loads(f.read_text())["total"] for f in files)
    assert totals == [1] * len(ids)


def test_info_vacuum_compact(small, capsys):
    assert main(["info", str(small.path), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["generation"] == 1 and info["tables"]["capsules"]["rows"] == 12
    small.ingest({"content": "one more", "source": "s", "anchor": "b"})
    assert main(["compact", str(small.path)]) == 0
    assert json.loads(capsys.readouterr().out) == {"capsules": 2, "journal": 2}
    assert main(["vacuum", str(small.path), "--grace-seconds", "0"]) == 1  # refused: no grace
    assert "grace_seconds" in capsys.readouterr().err
    assert main(["vacuum", str(small.path)]) == 0
    assert json.loads(capsys.readouterr().out)["partitions"] == 4


def test_as_of_reads_an_earlier_generation(small, capsys):
    small.ingest({"content": "later", "source": "s", "anchor": "b"})
    assert main(["digest", str(small.path), "--as-of", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 12
