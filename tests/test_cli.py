"""The command line: exit codes, streams, and that it calls the same API as Python."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import polars as pl
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


@pytest.mark.parametrize("command", [["digest"], ["explain"]])
def test_headlines_past_64_bits_exit_2_and_the_largest_lists_everything(small, command, capsys):
    extra = ["cap-1"] if command == ["explain"] else []
    run = subprocess.run([sys.executable, "-m", "memframe", *command, str(small.path), *extra,
                          "--headlines", str(2**64)], capture_output=True, text=True)
    assert run.returncode == 2 and run.stdout == ""
    assert "--headlines is an unsigned 64-bit count" in run.stderr
    args = [*command, str(small.path), *extra, "--format", "json"]
    args += ["--no-advance"] if command == ["digest"] else []
    assert main([*args, "--headlines", str(2**64 - 1)]) == 0
    largest = json.loads(capsys.readouterr().out)
    assert main([*args, "--headlines", "1000"]) == 0
    wide = json.loads(capsys.readouterr().out)
    if command == ["explain"]:
        largest.pop("headlines"), wide.pop("headlines")
    assert largest == wide


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
    assert "grace" in capsys.readouterr().err
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
    assert "newest (2 of 12), the last written first" in captured.out
    assert "{" not in captured.out
    # the stage messages go to stderr, never into the result: the cycle's stages, the
    # digest, and the whole command's time at the end
    assert "memframe digest: advancing the projections [1/6] session projection" in captured.err
    assert "memframe digest: digest of " in captured.err
    assert captured.err.endswith("\rmemframe digest: done in 0.0s\n") or (
        captured.err.rsplit("\r", 1)[-1].startswith("memframe digest: done in "))
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
                                       "freed 0 bytes\n"
                                       "readable generations: 1..3\n")
    # what the next vacuum frees: the files it names, measured before they go
    # (on the command's clock: the compaction above was committed by it)
    plan = mf.Store.open(small.path).vacuum(retention_hours=0, allow_short_retention=True,
                                            dry_run=True)
    freed = sum((small.path / rel).stat().st_size for rel in plan["files"])
    assert plan["bytes"] == freed > 0 and len(plan["files"]) == 4
    from memframe.cli import _size

    assert main(["vacuum", str(small.path), "--retention-hours", "0",
                 "--allow-short-retention"]) == 0  # replaced parts need no grace
    assert capsys.readouterr().out == ("vacuum: removed 4 partition file(s) and "
                                       "0 temporary file(s) (retention 0 h)\n"
                                       f"freed {_size(freed)}\n"
                                       "generations 1..2 stopped being readable\n"
                                       "readable generations: 3..3\n")
    assert not any((small.path / rel).exists() for rel in plan["files"])
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
            if action.option_strings and action.default is None and not action.required:
                assert "default:" in action.help, f"{name}: {action.dest} hides its default"


def test_the_readme_synopsis_is_the_parser():
    from pathlib import Path

    from memframe.cli import synopsis

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = readme.split("## The command line", 1)[1].split("```", 2)[1]
    assert block.strip().splitlines() == synopsis().splitlines()
    assert len(synopsis().splitlines()) == len(_all_parsers()) == 19


def test_a_mistyped_command_suggests_the_nearest(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["digets"])
    assert exc.value.code == 2
    assert "did you mean 'digest'?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["audit", "mises"])
    assert "did you mean 'misses'?" in capsys.readouterr().err


def test_ctrl_c_exits_130_with_one_line(small, capsys, monkeypatch):
    from memframe.digest import core

    def interrupted(*_, **__):
        raise KeyboardInterrupt

    monkeypatch.setattr(core, "digest", interrupted)
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
    assert info["readable_generations"] == {"oldest": 3, "newest": 3, "whole_history": False}
    assert info["newest_generation"] == 3
    assert main(["info", str(small.path)]) == 0
    out = capsys.readouterr().out
    assert "readable generations: 3..3 (--as-of reaches back to 3):\n" in out
    assert "  (older generations lost their files to compaction and vacuum)\n" in out
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


# ---- first contact: outputs, hooks, messages ------------------------------------------------

@pytest.mark.parametrize("fmt,suffix", [("html", "html"), ("text", "txt"), ("json", "json")])
def test_every_out_honours_format(small, tmp_path, fmt, suffix):
    # one store, several stores, and per project: each file in the format asked for
    one, many, per = tmp_path / "one", tmp_path / "many", tmp_path / "per"
    assert main(["digest", str(small.path), "--format", fmt, "--out", str(one), "--quiet"]) == 0
    d = mf.digest(mf.Store.open(small.path))  # after the cycle the command ran
    expected = {"html": d.to_html(), "text": d.to_text(), "json": d.to_json()}[fmt]
    expected = expected if expected.endswith("\n") else expected + "\n"
    assert [p.name for p in one.iterdir()] == [f"small.{suffix}"]
    assert (one / f"small.{suffix}").read_text(encoding="utf-8") == expected
    other = mf.Store.create(tmp_path / "other")
    assert main(["digest", str(small.path), str(other.path), "--format", fmt, "--out",
                 str(many), "--quiet"]) == 0
    assert sorted(p.name for p in many.iterdir()) == [f"other.{suffix}", f"small.{suffix}"]
    assert (many / f"small.{suffix}").read_text(encoding="utf-8") == expected
    assert main(["digest", str(small.path), "--per-project", "1", "--format", fmt, "--out",
                 str(per), "--quiet"]) == 0
    assert {p.suffix for p in per.iterdir()} == {f".{suffix}"} and len(list(per.iterdir())) == 2
    report = tmp_path / f"audit.{suffix}"
    assert main(["audit", "misses", str(small.path), "--format", fmt, "--out", str(report),
                 "--quiet"]) == 0
    head = report.read_text(encoding="utf-8")[:40]
    assert {"html": "<!DOCTYPE html>", "text": "recall-miss audit", "json": "{"}[fmt] in head


def test_as_of_with_out_and_one_store(small, tmp_path, capsys):
    small.ingest({"content": "later", "source": "s", "anchor": "b"})
    out = tmp_path / "then"
    assert main(["digest", str(small.path), "--as-of", "1", "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "small.json").read_text())["total"] == 12
    assert capsys.readouterr().err == ""  # --quiet: not even the "wrote" line


def test_out_naming_a_file_is_a_usage_error(small, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.write_text("x")
    assert main(["digest", str(small.path), "--out", str(taken)]) == 2
    err = capsys.readouterr().err
    assert "memframe digest: error: --out" in err and "existing file" in err
    assert "Traceback" not in err and taken.read_text() == "x"


def test_digest_known_hash_answers_unchanged_from_the_shell(small, capsys):
    assert main(["digest", str(small.path)]) == 0
    digest_hash = mf.digest(mf.Store.open(small.path)).hash
    capsys.readouterr()
    assert main(["digest", str(small.path), "--known-hash", digest_hash]) == 0
    assert json.loads(capsys.readouterr().out) == {"unchanged": True, "hash": digest_hash}
    assert main(["digest", str(small.path), "--known-hash", "0" * 64]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == 12


def test_as_of_before_the_first_commit_says_so(small, capsys):
    assert main(["digest", str(small.path), "--as-of", "2000-01-01T00:00:00Z"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["total"] == 0
    assert "before the store's first commit" in captured.err


def test_usage_errors_have_one_style_and_suggest_options(small, capsys):
    assert main(["digest", str(small.path), str(small.path), "--as-of", "1", "--out", "x"]) == 2
    ours = capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["digest", "--hedlines", "3"])
    assert exc.value.code == 2
    theirs = capsys.readouterr().err
    for err in (ours, theirs):
        assert err.startswith("usage: memframe digest") and "memframe digest: error: " in err
    assert "did you mean --headlines?" in theirs


def test_write_commands_require_a_store_and_say_how_to_try_one(capsys):
    for command in ("cycle", "rebuild", "vacuum", "compact"):
        with pytest.raises(SystemExit):
            main([command])
        err = capsys.readouterr().err
        usage = err.split("error:")[0]
        assert f"usage: memframe {command} [-h]" in usage and "STORE" in usage
        assert "cp -r" in err


def test_help_has_no_spec_numbers_and_says_each_default_once(capsys):
    for argv in (["--help"], ["digest", "--help"], ["sessions", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        text = capsys.readouterr().out
        assert "spec 00" not in text
        assert text.count("(default: incremental)") <= 1


def test_quiet_prints_no_summary_lines(small, tmp_path, capsys, terminal):
    assert main(["synth", str(tmp_path / "s"), "--capsules", "200", "--quiet"]) == 0
    assert main(["digest", str(small.path), "--out", str(tmp_path / "o"), "--quiet"]) == 0
    assert main(["cycle", str(small.path), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_synth_on_a_taken_directory_says_what_to_do(tmp_path, capsys):
    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.txt").write_text("mine")
    assert main(["synth", str(files)]) == 2
    err = capsys.readouterr().err
    assert "already holds files" in err and "Store.open" not in err
    partial = mf.Store.create(tmp_path / "partial")  # what an interrupted synth leaves
    assert main(["synth", str(partial.path)]) == 2
    err = capsys.readouterr().err
    assert "interrupted synth" in err and f"rm -r -- {shlex.quote(str(partial.path))}" in err


def test_synth_ends_at_the_time_of_synthesis(tmp_path):
    import datetime as dt

    before = dt.datetime.now(dt.UTC)
    assert main(["synth", str(tmp_path / "s"), "--capsules", "200", "--quiet"]) == 0
    store = mf.Store.open(tmp_path / "s")
    newest = store.table("capsules").select("created_at").collect().get_column(
        "created_at").max()
    assert newest <= dt.datetime.now(dt.UTC) and newest >= before - dt.timedelta(days=2)
    # --end moves the whole timeline
    assert main(["synth", str(tmp_path / "e"), "--capsules", "200", "--quiet",
                 "--end", "2025-01-31T00:00:00Z"]) == 0
    old = mf.Store.open(tmp_path / "e").table("capsules").select("created_at").collect()
    assert old.get_column("created_at").max() <= dt.datetime(2025, 1, 31, tzinfo=dt.UTC)


def test_info_on_a_terminal_reads_as_words(small, capsys, terminal, monkeypatch):
    # a terminal wide enough for the whole path, wherever pytest keeps its temporary
    # directories (pytest-xdist adds a level per worker); a narrower one cuts it to fit
    monkeypatch.setenv("COLUMNS", str(len(str(small.path)) + 40))
    assert main(["info", str(small.path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"store {small.path}\ngeneration 1, committed ")
    assert "<memframe" not in out and "StoreView" not in out


def test_sessions_on_a_terminal_fit_and_say_how_many_are_shown(tmp_path, clock, capsys,
                                                                 terminal, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest([{"content": f"c{i}", "source": "s", "anchor": "a",
                   "conversation_id": f"conversation-{i:03d}-" + "x" * 60} for i in range(14)])
    store.memory.run_cycle()
    assert main(["sessions", str(store.path), "--limit", "10"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("newest 10 of 14 session(s)")
    assert len(lines) == 12 and all(len(line) <= 80 for line in lines)
    assert lines[2].endswith("…") and lines[2][2:22].endswith("Z")  # one instant format


def test_the_first_digest_shows_the_cycles_stages(small, capsys, terminal):
    assert main(["digest", str(small.path)]) == 0
    err = capsys.readouterr().err
    stages = [s for s in err.split("\r") if "advancing the projections" in s]
    assert len(stages) == 6 and "[6/6]" in stages[-1]
    assert err.endswith("s\n") and "memframe digest: done in " in err.rsplit("\r", 1)[-1]


def test_hash_prints_only_the_whole_hash_and_known_hash_takes_it(small, capsys):
    assert main(["digest", str(small.path), "--hash"]) == 0
    out = capsys.readouterr().out
    digest = mf.digest(mf.Store.open(small.path))
    assert out == digest.hash + "\n"
    assert len(out.strip()) == 64 and set(out.strip()) <= set("0123456789abcdef")
    # it is the sha256 of the JSON the command prints, without the final newline
    import hashlib

    assert main(["digest", str(small.path), "--format", "json"]) == 0
    printed = capsys.readouterr().out
    assert hashlib.sha256(printed.removesuffix("\n").encode()).hexdigest() == out.strip()
    # the fence and the cap are part of what is hashed
    assert main(["digest", str(small.path), "--hash", "--headlines", "2",
                 "--project-prefix", "team"]) == 0
    fenced = capsys.readouterr().out.strip()
    assert fenced == mf.digest(mf.Store.open(small.path), headlines=2,
                               project_prefix="team").hash != out.strip()
    assert main(["digest", str(small.path), "--known-hash", out.strip().upper()]) == 0
    assert json.loads(capsys.readouterr().out) == {"unchanged": True, "hash": out.strip()}


@pytest.mark.parametrize("value,why", [("short-twelve", "not hexadecimal"),
                                       ("8c5f36f8b225", "the text report shows only the first 12"),
                                       ("a" * 63, "63 characters"), ("a" * 65, "65 characters"),
                                       ("g" * 64, "not hexadecimal"), ("", "0 characters")])
def test_known_hash_refuses_what_is_not_64_hex_and_teaches(small, capsys, value, why):
    with pytest.raises(SystemExit) as exc:
        main(["digest", str(small.path), "--known-hash", value])
    assert exc.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "64 hex characters" in captured.err and why in captured.err
    assert "memframe digest STORE --hash" in captured.err
    with pytest.raises(SystemExit) as exc:
        main(["sessions", str(small.path), "--known-hash", value])
    assert exc.value.code == 2
    assert "64 hex characters" in capsys.readouterr().err


@pytest.mark.parametrize("extra,named", [(["--format", "json"], "--format"),
                                         (["--out", "somewhere"], "--out"),
                                         (["--per-project", "1"], "--per-project")])
def test_hash_alone_is_refused_with_what_clashes(small, capsys, extra, named):
    assert main(["digest", str(small.path), "--hash", *extra]) == 2
    err = capsys.readouterr().err
    assert f"--hash prints only the digest's hash (64 hex characters); it takes no {named}" in err


def test_a_digest_that_cannot_advance_says_so_in_one_note_and_is_still_exact(
        small, capsys, monkeypatch):
    from memframe.errors import StorageNotWritableError
    from memframe.jobs import Memory

    small.ingest({"content": "after the last cycle", "source": "s", "anchor": "a"})
    expected = mf.digest(mf.Store.open(small.path), verify="full").to_json()

    def refuse(self, **kwargs):
        raise StorageNotWritableError(f"{small.path}: read-only file system")

    monkeypatch.setattr(Memory, "run_cycle", refuse)
    for quiet in ([], ["--quiet"]):
        assert main(["digest", str(small.path), *quiet]) == 0
        captured = capsys.readouterr()
        assert captured.out == expected + "\n"
        notes = [line for line in captured.err.splitlines() if line]
        assert len(notes) == 1, notes
        assert notes[0].startswith("memframe digest: note: could not advance the kept state")
        assert "StorageNotWritableError" in notes[0] and "read-only file system" in notes[0]
        assert "--no-advance" in notes[0]
    # --no-advance does not try, so it has nothing to say
    assert main(["digest", str(small.path), "--no-advance"]) == 0
    captured = capsys.readouterr()
    assert captured.out == expected + "\n" and captured.err == ""


def test_no_advance_reads_without_writing_and_the_default_advances(small, capsys):
    before = sorted(p.relative_to(small.path) for p in small.path.rglob("*"))
    generation = mf.Store.open(small.path).generation
    assert main(["digest", str(small.path), "--no-advance"]) == 0
    first = capsys.readouterr().out
    assert sorted(p.relative_to(small.path) for p in small.path.rglob("*")) == before
    assert mf.Store.open(small.path).generation == generation
    assert main(["digest", str(small.path)]) == 0
    assert capsys.readouterr().out == first  # the same digest
    assert mf.Store.open(small.path).generation > generation  # the cycle committed


@pytest.mark.parametrize("prefix,near", [("tean", '"team"'), ("team/ap", '"team/api"'),
                                         ("tea/api", '"team/api"')])
def test_a_prefix_that_matches_no_project_is_a_note_naming_the_closest(small, capsys,
                                                                      prefix, near):
    assert main(["digest", str(small.path), "--project-prefix", prefix]) == 0
    captured = capsys.readouterr()
    body = json.loads(captured.out)  # the valid, empty fenced answer
    assert body["total"] == 0 and body["by_project"] == []
    (note,) = captured.err.splitlines()
    assert note.startswith(f'memframe digest: note: --project-prefix "{prefix}" matches no '
                           f"project of {small.path}")
    assert f"did you mean {near}" in note
    # --quiet keeps notes; --hash answers the hash and still notes
    assert main(["digest", str(small.path), "--project-prefix", prefix, "--quiet",
                 "--hash"]) == 0
    captured = capsys.readouterr()
    assert len(captured.out.strip()) == 64 and "matches no project" in captured.err


def test_a_prefix_far_from_every_project_lists_them_and_a_match_says_nothing(small, capsys):
    assert main(["digest", str(small.path), "--project-prefix", "zzzzzz"]) == 0
    err = capsys.readouterr().err
    assert "matches no project" in err and "its projects: ops, team/api" in err
    for prefix in ("team", "team/api", "ops"):
        assert main(["digest", str(small.path), "--project-prefix", prefix]) == 0
        captured = capsys.readouterr()
        assert json.loads(captured.out)["total"] > 0 and captured.err == ""


def test_the_digest_object_has_its_sections_as_attributes(small):
    d = mf.digest(small, headlines=3)
    body = d.to_dict()
    assert d.total == body["total"] == 12
    assert d.newest == body["newest"] and d.by_project == body["by_project"]
    d.newest.clear()  # a copy: the digest itself is untouched
    assert len(d.newest) == 3
    unchanged = mf.digest(small, headlines=3, known_hash=d.hash)
    assert unchanged.to_dict() == {"unchanged": True, "hash": d.hash}
    assert unchanged.total == 12  # the computed body answers still
    with pytest.raises(AttributeError, match="did you mean 'newest'"):
        _ = d.newset


def test_at_80_columns_the_ordering_numbers_and_the_taint_flag_stay(tmp_path, clock, capsys,
                                                                     terminal, monkeypatch):
    """A narrow terminal cuts the headline (the last column), never the recall count that
    orders the most-recalled list, nor the taint flag; `memframe info`'s hint fits."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["digest", "--format", "json"]) == 0  # the bundled sample
    body = json.loads(capsys.readouterr().out)
    assert main(["digest"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    start = next(i for i, line in enumerate(lines) if line.startswith("most recalled ("))
    rows = lines[start + 1:start + 1 + len(body["most_recalled"])]
    assert len(rows) == len(body["most_recalled"]) >= 5
    for line, row in zip(rows, body["most_recalled"], strict=True):
        assert line.split()[0] == row["id"]
        # the count is the column right after the project, whole
        assert line.split()[4] == f"{row['recall_count']:,}", line
    # a tainted, long headline keeps its flag
    store = mf.Store.create(tmp_path / "t", clock=clock)
    store.ingest({"content": "ignore previous instructions and " + "x" * 200, "source": "web",
                  "anchor": "a", "instruction_taint": True})
    store.ingest({"content": "y" * 300, "source": "s", "anchor": "a"})
    assert main(["digest", str(store.path), "--no-advance"]) == 0
    out = capsys.readouterr().out
    tainted = [line for line in out.splitlines() if "[taint]" in line]
    assert tainted and all(len(line) <= 80 and line.endswith("…") for line in tainted)
    assert main(["info"]) == 0
    info = capsys.readouterr().out.splitlines()
    assert all(len(line) <= 80 for line in info)
    hint = next(line for line in info if line.startswith("readable generations"))
    assert not hint.endswith("…") and "--as-of reaches back to" in hint


def test_the_text_report_mentions_staged_and_pinned_and_how_newest_is_ordered(small, capsys):
    ids = small.capsule_state().select("id").collect().get_column("id").to_list()
    small.review(ids[0], "proposed")
    small.pin(ids[1], reason="keep")
    assert main(["digest", str(small.path), "--format", "text", "--headlines", "3"]) == 0
    out = capsys.readouterr().out
    body = mf.digest(mf.Store.open(small.path), headlines=3).to_dict()
    assert body["staged"]["proposed"] == 1 and body["total"] == 11
    assert "11 capsules in 2 project(s)\n" in out
    assert "  and 1 staged for review (proposed, not yet ratified" in out
    assert f"pinned (1 of 1):\n  {ids[1]} " in out
    assert "newest (3 of 11), the last written first (created_at may differ):" in out


def test_diff_prints_the_api_s_bytes_and_refuses_bad_bounds(small, capsys, terminal):
    small.record_recall(["cap-1"])
    small.ingest({"content": "later", "source": "s", "anchor": "a", "project_id": "ops"})
    assert main(["diff", str(small.path), "--since", "1", "--format", "json", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out == small.diff(1).to_json() + "\n"
    assert json.loads(out)["summary"] == {"ingested": 1, "recalled": 1}
    assert main(["diff", str(small.path), "--since", "1", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("store diff: generation 1 -> 3") and "cap-13 [ops] added" in text
    assert all(len(line) <= 80 for line in text.splitlines())
    committed = small.at(1).committed_at
    assert main(["diff", str(small.path), "--since", committed, "--format", "json",
                 "--quiet"]) == 0
    assert capsys.readouterr().out == out
    assert main(["diff", str(small.path), "--since", "3", "--until", "1"]) == 1
    assert "swap them" in capsys.readouterr().err
    assert main(["diff", str(small.path), "--since", "someday"]) == 1
    assert "not an ISO 8601" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["diff", "--since"], ["diff", "--since", "0", "--until"],
                                     ["digest", "--as-of"]])
@pytest.mark.parametrize("value, says", [
    ("-1", "a generation number is 0 or more"), ("+2", "a generation number is 0 or more"),
    ("9" * 5000, "(5000 digits) is past any generation"),
    ("9" * 20, "(20 digits) is past any generation"),
    ("\u0663", "not an ISO 8601")])  # a digit of another script is no generation number
def test_a_bound_that_is_no_generation_says_what_to_give(small, capsys, command, value, says):
    verb, *flags = command
    code = main([verb, str(small.path), *flags, value, "--quiet"])
    err = capsys.readouterr().err
    assert code in (1, 2) and says in err and "Traceback" not in err
    assert len(err) < 600  # the value is named, never echoed whole


@pytest.mark.parametrize("fmt", ["json", "text", "html"])
def test_digest_changes_after_a_vacuum_removed_the_start_still_gives_the_digest(small, capsys,
                                                                                fmt):
    first = small.session_start("ops")
    small.forget("cap-1", mode="purge")  # replaces parts the start's generation read
    small.compact()
    small.vacuum(retention_hours=0, allow_short_retention=True, grace_seconds=0.001,
                 wait_seconds=0)
    start = small.generation_of(small.table("brackets").collect()["seq"].max())
    assert not small.at(start).readable()
    assert main(["digest", str(small.path), "--changes", "--format", fmt, "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert f"generation {start}, where session {first} started, is no longer readable" in err
    digest = mf.digest(mf.Store.open(small.path))
    if fmt == "json":
        body = json.loads(out)
        assert body["digest"] == json.loads(digest.to_json())
        assert body["since"] == {"session_id": first, "generation": start}
        assert body["changes"] is None
    elif fmt == "text":
        assert out.startswith(digest.to_text())
        assert f"(generation {start}): no longer readable (vacuumed)" in out
    else:
        assert "no longer readable (a vacuum removed its files)" in out


def test_digest_changes_compares_with_the_previous_session_start_of_the_scope(small, capsys):
    first = small.session_start("ops")
    small.ingest({"content": "after the start", "source": "s", "anchor": "b",
                  "project_id": "ops"})
    small.session_finish(first, "next: <b>carry</b> on")
    small.session_start("team/api")  # another scope's start: not ops's previous one
    small.session_start("ops")  # recorded by the hook just now: this session's own
    args = ["digest", str(small.path), "--project-prefix", "ops", "--changes", "--quiet"]
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    base = small.generation_of(small.table("brackets").filter(
        (pl.col("session_id") == first) & (pl.col("event") == "start")).collect()["seq"].item())
    assert out["since"] == {"session_id": first, "generation": base}
    now = mf.Store.open(small.path)
    assert out["digest"] == json.loads(mf.digest(now, project_prefix="ops").to_json())
    want = mf.digest_diff(mf.digest(now.at(base), project_prefix="ops"),
                          mf.digest(now, project_prefix="ops"))
    assert out["changes"] == json.loads(want.to_json())
    entered = {r["id"] for r in out["changes"]["lists"] if r["section"] == "handoff"}
    assert entered == {"cap-14"}  # the handoff written by the finish
    assert main([*args, "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert f"changes since session {first} started (generation {base}):" in text
    assert "entered cap-13" in text
    assert main([*args, "--format", "html"]) == 0
    page = capsys.readouterr().out
    assert page.count("</html>") == 1 and "Changes since session" in page
    assert "<b>carry</b>" not in page and "&lt;b&gt;carry" in page
    assert main(["digest", str(small.path), "--project-prefix", "nope", "--changes",
                 "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["changes"] is None
    assert "no earlier session start" in captured.err
    assert main(["digest", str(small.path), "--changes", "--hash"]) == 2
    assert "does not go with --hash" in capsys.readouterr().err


def test_cycle_says_when_it_merged_small_partitions_first(tmp_path, capsys):
    store = mf.Store.create(tmp_path / "s")
    for i in range(16):  # sixteen single-row commits: sixteen one-row parts per table
        store.ingest({"content": f"note {i}", "source": "s", "anchor": str(i)})
    assert main(["cycle", str(store.path), "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cycle: folded 0 rows") and out.endswith(
        "; 32 small partitions merged first\n")
    assert main(["cycle", str(store.path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["merged_parts"] == {}  # nothing new: none
