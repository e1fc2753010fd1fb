"""The command line refuses an --out it cannot write, and a Ray that will not start, with a
message and no traceback.

Regression: ``--out`` naming an existing file (batch digest, ``--per-project``, ``audit
--out``) gave a raw FileExistsError; a failed Ray start printed a full traceback.
"""

from __future__ import annotations

import pytest

import memframe as mf
from memframe.cli import main


@pytest.fixture
def two_stores(tmp_path) -> list[str]:
    paths = []
    for name in ("a", "b"):
        store = mf.Store.create(tmp_path / name)
        store.ingest({"content": name, "source": "s", "anchor": name, "project_id": "p/x"})
        paths.append(str(store.path))
    return paths


@pytest.mark.parametrize("argv", [
    lambda stores, f: ["digest", *stores, "--out", f],
    lambda stores, f: ["digest", stores[0], "--per-project", "1", "--out", f],
    lambda stores, f: ["digest", *stores, "--out", f + "/below"],
    lambda stores, f: ["audit", "misses", stores[0], "--out", f + "/below/report.json"],
])
def test_an_out_that_cannot_be_written_is_a_usage_error(tmp_path, two_stores, capsys, argv):
    existing = tmp_path / "taken.json"
    existing.write_text("mine")
    assert main(argv(two_stores, str(existing))) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "Traceback" not in err
    assert existing.read_text() == "mine"


def test_audit_out_naming_a_directory_is_a_usage_error(tmp_path, two_stores, capsys):
    assert main(["audit", "misses", two_stores[0], "--out", str(tmp_path)]) == 2
    assert "names a directory" in capsys.readouterr().err


def test_the_batch_api_refuses_an_out_dir_that_is_a_file(tmp_path, two_stores):
    (tmp_path / "taken").write_text("mine")
    with pytest.raises(mf.errors.InvalidInputError, match="existing file"):
        mf.digest_many(two_stores, out_dir=tmp_path / "taken")


def test_a_ray_that_will_not_start_is_a_message(tmp_path, two_stores, capsys, monkeypatch):
    ray = pytest.importorskip("ray")

    def refuse(*_args, **_kwargs):
        raise ConnectionError("could not connect to the GCS at 127.0.0.1:1\nlong details")

    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    argv = ["digest", *two_stores, "--out", str(tmp_path / "out"), "--engine", "ray",
            "--address", "127.0.0.1:1"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "could not start or reach the Ray cluster at '127.0.0.1:1'" in err
    assert "ConnectionError" in err and "Traceback" not in err and "long details" not in err


def test_synth_over_a_store_suggests_a_quoted_removal(tmp_path, capsys):
    """issue 38: a path with a space and a lone ``~`` must not paste into ``rm -r ~``."""
    import shlex

    from memframe.cli import main as cli_main

    target = tmp_path / "syn dir" / "x ~"
    mf.Store.create(target).ingest({"content": "x", "source": "s", "anchor": "a"})
    assert cli_main(["synth", str(target), "--capsules", "3", "--seed", "1"]) == 2
    err = capsys.readouterr().err
    assert f"rm -r -- {shlex.quote(str(target))}" in err
    assert shlex.split(err.split("(rm -r -- ", 1)[1].split(")", 1)[0]) == [str(target)]
