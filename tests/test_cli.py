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
    assert main(["vacuum", str(small.path)]) == 0  # the default window keeps history
    assert json.loads(capsys.readouterr().out)["readable"] == [1, 3]
    assert main(["vacuum", str(small.path), "--retention-hours", "0",
                 "--allow-short-retention"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["partitions"] == 4 and report["no_longer_readable"] == [1, 2]


def test_as_of_reads_an_earlier_generation(small, capsys):
    small.ingest({"content": "later", "source": "s", "anchor": "b"})
    assert main(["digest", str(small.path), "--as-of", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 12


# ---- one output convention: text on a terminal, JSON when piped --------------------------

@pytest.fixture
def terminal(monkeypatch):
    """Pretend stdout (and stderr) is a terminal."""
    from memframe import cli

    monkeypatch.setattr(cli, "_terminal", lambda: True)
    monkeypatch.setattr(cli, "_progress", lambda args: not getattr(args, "quiet", False))


def test_digest_on_a_terminal_is_the_readable_report(small, capsys, terminal):
    assert main(["digest", str(small.path), "--headlines", "2"]) == 0
    captured = capsys.readouterr()
    d = mf.digest(mf.Store.open(small.path), headlines=2)
    assert captured.out == d.to_text() + "\n"
    assert captured.out.startswith(f"memframe digest  generation {d.generation}")
    assert "newest (2 of 12):" in captured.out and "{" not in captured.out
    # the stage message goes to stderr, never into the result
    assert captured.err.startswith("memframe digest: digest of ") and " done in " in captured.err
    # --format json still gives the wire bytes; --quiet silences the stage line
    assert main(["digest", str(small.path), "--format", "json", "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out == mf.digest(mf.Store.open(small.path)).to_json() + "\n"
    assert captured.err == ""


def test_piped_output_is_json_for_every_command_with_both(small, capsys):
    for argv in (["digest", str(small.path)], ["sessions", str(small.path)],
                 ["audit", "misses", str(small.path)], ["info", str(small.path)],
                 ["cycle", str(small.path)], ["rebuild", str(small.path)],
                 ["compact", str(small.path)], ["vacuum", str(small.path)]):
        assert main(argv) == 0, argv
        captured = capsys.readouterr()
        json.loads(captured.out)  # one JSON document
        assert captured.err == "", argv  # no stage messages when not on a terminal


def test_sessions_rows_are_objects(tmp_path, clock, capsys):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest([{"content": f"m{i}", "source": "s", "anchor": "a",
                   "conversation_id": "conv-1"} for i in range(3)])
    store.memory.run_cycle()
    assert main(["sessions", str(store.path)]) == 0
    body = json.loads(capsys.readouterr().out)
    page = store.memory.session_digest()
    assert body["hash"] == page.hash and body["total"] == 1
    (row,) = body["sessions"]
    assert row["conversation_id"] == "conv-1" and row["memory_count"] == 3
    assert row["first_at"].endswith("Z") and row["last_member_id"] == "cap-3"
    assert main(["sessions", str(store.path), "--known-hash", page.hash]) == 0
    assert json.loads(capsys.readouterr().out)["unchanged"] is True


def test_maintenance_commands_print_a_line_on_a_terminal(small, capsys, terminal):
    small.ingest({"content": "one more", "source": "s", "anchor": "b"})
    assert main(["compact", str(small.path)]) == 0
    assert capsys.readouterr().out == ("compact: merged 2 partition(s) of capsules, "
                                       "2 partition(s) of journal\n")
    assert main(["vacuum", str(small.path)]) == 0  # the default window keeps them
    assert capsys.readouterr().out == ("vacuum: removed 0 partition file(s) and "
                                       "0 temporary file(s) (retention 168 h)\n"
                                       "readable generations: 1..3\n")
    assert main(["vacuum", str(small.path), "--retention-hours", "0",
                 "--allow-short-retention"]) == 0  # replaced parts need no grace
    assert capsys.readouterr().out == ("vacuum: removed 4 partition file(s) and "
                                       "0 temporary file(s) (retention 0 h)\n"
                                       "generations 1..2 stopped being readable\n"
                                       "readable generations: 3..3\n")
    assert main(["cycle", str(small.path)]) == 0
    assert capsys.readouterr().out.startswith("cycle: folded 0 rows, wrote 0 session rows")


# ---- help, synopsis, typos, interrupts -----------------------------------------------------

def _all_parsers():
    from memframe.cli import _commands, build_parser

    return _commands(build_parser(), "memframe")


def test_every_option_has_help_and_shows_its_default():
    import argparse

    for name, parser in _all_parsers():
        text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            assert action.help, f"{name}: {action.dest} has no help"
            if action.option_strings and action.default not in (None, False):
                assert f"default: {action.default}" in " ".join(text.split()), \
                    f"{name}: {action.dest} hides its default"
            if action.option_strings and action.default is None:
                assert "default:" in action.help, f"{name}: {action.dest} hides its default"


def test_the_readme_synopsis_is_the_parser():
    from pathlib import Path

    from memframe.cli import synopsis

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("## The command line", 1)[1].split("```", 2)[1]
    assert block.strip().splitlines() == synopsis().splitlines()
    assert len(synopsis().splitlines()) == len(_all_parsers()) == 10


def test_a_mistyped_command_suggests_the_nearest(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["digets"])
    assert exc.value.code == 2
    assert "did you mean 'digest'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["audit", "mises"])
    assert "did you mean 'misses'?" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(small, capsys, monkeypatch):
    import memframe.digest as digest_mod

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(digest_mod, "digest", interrupted)
    assert main(["digest", str(small.path)]) == 130
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == "memframe: interrupted"


# ---- history: what is readable, and what is missing ----------------------------------------

def test_info_says_which_generations_are_readable(small, capsys, terminal):
    assert main(["info", str(small.path)]) == 0
    assert "readable generations: 1..1 (the whole history" in capsys.readouterr().out
    small.ingest({"content": "one more", "source": "s", "anchor": "b"})
    small.compact()
    small.vacuum(retention_hours=0, allow_short_retention=True)
    assert main(["info", str(small.path), "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["readable_generations"] == [3, 3] and info["newest_generation"] == 3
    assert main(["info", str(small.path)]) == 0
    assert "readable generations: 3..3 (older ones lost files" in capsys.readouterr().out
    assert main(["digest", str(small.path), "--as-of", "2"]) == 1
    err = capsys.readouterr().err
    assert "replaced at generation 3 and then vacuumed" in err
    assert "generations 3 and later may be read" in err


def test_a_missing_file_is_reported_as_missing(small, capsys):
    (part,) = small.files("capsules")
    part.unlink()
    assert main(["digest", str(small.path)]) == 1
    err = capsys.readouterr().err
    assert "is missing from" in err and "vacuumed" not in err


def test_create_exist_ok_opens_the_store_already_there(small, tmp_path):
    again = mf.Store.create(small.path, exist_ok=True)
    assert again.generation == small.generation == 1
    with pytest.raises(mf.errors.StoreExistsError):
        mf.Store.create(small.path)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file").write_text("x")
    with pytest.raises(mf.errors.StoreExistsError):  # files, not a store: still refused
        mf.Store.create(tmp_path / "junk", exist_ok=True)
    fresh = mf.Store.create(tmp_path / "new", exist_ok=True)
    assert fresh.generation == 0


def test_distributed_is_an_attribute_like_audit():
    import importlib

    assert mf.distributed is importlib.import_module("memframe.distributed")
    assert mf.audit is importlib.import_module("memframe.audit")
