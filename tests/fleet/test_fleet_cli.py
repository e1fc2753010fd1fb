"""`memframe fleet`: a table on a terminal, JSON when piped, an HTML page with --html."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import pytest

import memframe as mf
from memframe import cli
from memframe.cli import main

from .conftest import NOW

# the fleet on disk is built once per worker: keep this module's tests on one
pytestmark = pytest.mark.xdist_group("fleet")

STAMP = "2026-08-04T12:00:00Z"
assert mf.fleet([], now=NOW).to_dict()["now"] == STAMP


@pytest.fixture
def terminal(monkeypatch):
    """Pretend stdout is a wide terminal: the table still keeps to 80 columns."""
    monkeypatch.setattr(cli, "_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "200")


def test_piped_output_is_the_fleets_json(fleet_paths, capsys):
    code = main(["fleet", fleet_paths["root"], fleet_paths["notes"], "--now", STAMP])
    captured = capsys.readouterr()
    assert code == 1  # a store failed: the exit code says so, the JSON still has every row
    paths = sorted([*mf.fleet(fleet_paths["root"], now=NOW).frame["path"]])
    want = mf.fleet([*paths, fleet_paths["notes"]], now=NOW)
    assert captured.out == want.to_json() + "\n"
    assert f"{fleet_paths['notes']}: NotAStoreError" in captured.err


def test_a_terminal_gets_the_table_at_80_columns(fleet_paths, capsys, terminal):
    stores = [fleet_paths[n] for n in ("alpha", "gamma", "broken")]
    assert main(["fleet", *stores, "--now", STAMP]) == 0
    out = capsys.readouterr().out
    assert out == mf.fleet(stores, now=NOW).to_text(width=80) + "\n"
    assert all(len(line) <= 80 for line in out.splitlines())
    assert main(["fleet", *stores, "--now", STAMP, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["now"] == STAMP


def test_html_writes_the_overview_page(fleet_paths, tmp_path, capsys):
    target = tmp_path / "out" / "fleet.html"
    stores = [fleet_paths[n] for n in ("gamma", "broken")]
    assert main(["fleet", *stores, "--now", STAMP, "--html", str(target),
                 "--stale-days", "30"]) == 0
    page = target.read_text()
    assert page == mf.fleet(stores, now=NOW, stale_after=dt.timedelta(days=30)).to_html()
    assert "every store" in page and "30d" in page
    assert f"wrote {target}" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--now", "2026-08-04"], "with its offset"),
    (["--stale-days", "soon"], "non-negative number of days"),
    (["--address", "auto"], "--engine ray"),
    (["--engine", "spark"], "invalid choice"),
])
def test_bad_options_exit_2_with_a_teaching_message(fleet_paths, argv, message):
    run = subprocess.run([sys.executable, "-m", "memframe", "fleet", fleet_paths["gamma"],
                          *argv], capture_output=True, text=True)
    assert run.returncode == 2 and message in run.stderr, run.stderr
    assert run.stdout == ""
