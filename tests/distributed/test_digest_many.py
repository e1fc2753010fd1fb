"""digest_many on Ray tasks and local processes: identical to one-by-one digests."""

from __future__ import annotations

import json
import os
import sys
import types

import pytest

import memframe as mf
from memframe import cli, distributed
from memframe.digest.batch import BatchReport
from memframe.errors import InvalidInputError, MemframeError

from .conftest import NOW

# one pytest worker holds the session's local Ray (tests/distributed/conftest.py): two
# workers would each start a cluster on the same machine
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def one_by_one(paths, **kwargs):
    return {p: mf.digest(mf.Store.open(p), **kwargs) for p in paths}


def assert_same_digests(report, expected):
    assert list(report.digests) == list(expected)
    for path, want in expected.items():
        got = report.digests[path]
        assert got.to_json() == want.to_json(), path
        assert (got.hash, got.generation, got.rows_visited) == (
            want.hash, want.generation, want.rows_visited)


@pytest.mark.parametrize("engine", ["ray", "processes"])
def test_batch_equals_one_by_one(engine, digest_stores, ray_local):
    kwargs = {"now": NOW, "headlines": 3, "project_prefix": None}
    report = distributed.digest_many(digest_stores, engine=engine, progress=False, **kwargs)
    assert isinstance(report, BatchReport) and report.ok
    assert_same_digests(report, one_by_one(digest_stores, **kwargs))
    assert len({d.hash for d in report.digests.values()}) == len(digest_stores)


@pytest.mark.parametrize("engine", ["ray", "processes"])
def test_failures_are_reported_per_store_not_fatal(engine, digest_stores, broken_paths,
                                                   ray_local):
    paths = [broken_paths["missing"], digest_stores[0], broken_paths["not-a-store"],
             digest_stores[1], broken_paths["damaged"]]
    report = distributed.digest_many(paths, engine=engine, progress=False, now=NOW)
    assert not report.ok
    assert list(report.digests) == [digest_stores[0], digest_stores[1]]
    assert list(report.failures) == [broken_paths[k] for k in ("missing", "not-a-store",
                                                               "damaged")]
    assert report.failures[broken_paths["missing"]].startswith("NotAStoreError: ")
    assert report.failures[broken_paths["not-a-store"]].startswith("NotAStoreError: ")
    assert "memory_digest failed" in report.failures[broken_paths["damaged"]]
    assert_same_digests(report, one_by_one(digest_stores[:2], now=NOW))


def test_bad_digest_arguments_fail_every_store_the_same_way(digest_stores, ray_local):
    ray_report = distributed.digest_many(digest_stores[:2], engine="ray", progress=False,
                                         headlines=-1)
    proc_report = distributed.digest_many(digest_stores[:2], engine="processes",
                                          progress=False, headlines=-1)
    assert not ray_report.digests and ray_report.failures == proc_report.failures
    assert all(m.startswith("InvalidInputError") for m in ray_report.failures.values())


def test_out_dir_holds_one_json_per_store(tmp_path, digest_stores, ray_local):
    report = distributed.digest_many(digest_stores, engine="ray", out_dir=tmp_path / "out",
                                     progress=False, now=NOW)
    expected = one_by_one(digest_stores, now=NOW)
    assert list(report.written) == digest_stores
    for path, file in report.written.items():
        assert file == tmp_path / "out" / f"{os.path.basename(path)}.json"
        assert file.read_text(encoding="utf-8") == expected[path].to_json()


def test_relative_paths_are_reported_as_given(digest_stores, ray_local, monkeypatch):
    parent = os.path.dirname(digest_stores[0])
    monkeypatch.chdir(parent)
    name = os.path.basename(digest_stores[0])
    report = distributed.digest_many([name], engine="ray", progress=False, now=NOW)
    assert list(report.digests) == [name]


def test_cli_digest_with_the_ray_engine(tmp_path, digest_stores, broken_paths, ray_local,
                                        capsys):
    out = tmp_path / "cli-out"
    code = cli.main(["digest", *digest_stores, "--engine", "ray", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "digested 3 store(s)" in err  # (--quiet silences it; failures always show)
    for path in digest_stores:
        body = json.loads((out / f"{os.path.basename(path)}.json").read_text())
        assert body["total"] == mf.digest(mf.Store.open(path)).to_dict()["total"]
    code = cli.main(["digest", digest_stores[0], broken_paths["missing"], "--engine", "ray",
                     "--out", str(tmp_path / "cli-out-2"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "NotAStoreError" in err and "1 failed" in err


def test_engine_and_address_are_checked(digest_stores):
    with pytest.raises(InvalidInputError, match="ray, processes"):
        distributed.digest_many(digest_stores, engine="threads")
    with pytest.raises(InvalidInputError, match="engine='ray'"):
        distributed.digest_many(digest_stores, engine="processes", address="auto")
    with pytest.raises(InvalidInputError, match="unique store directory names"):
        distributed.digest_many([digest_stores[0], digest_stores[0] + "/../" +
                                 os.path.basename(digest_stores[0])], engine="ray",
                                out_dir="/nonexistent-never-created")
    assert distributed.digest_many([], engine="ray").digests == {}


def test_without_ray_the_error_says_how_to_install_it(digest_stores, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MemframeError, match=r'pip install "ray\[data\]>=2.30"'):
        distributed.digest_many(digest_stores, engine="ray")


class FakeRay(types.SimpleNamespace):
    """Records how Ray is started and stopped (no cluster needed)."""

    def __init__(self, initialized: bool):
        super().__init__(calls=[], up=initialized)

    def is_initialized(self):
        return self.up

    def init(self, **kwargs):
        self.calls.append(("init", kwargs))
        self.up = True

    def shutdown(self):
        self.calls.append(("shutdown", {}))
        self.up = False


def test_a_local_ray_is_started_for_the_call_and_stopped_after():
    fake = FakeRay(initialized=False)
    with distributed._ray_running(fake, None, None) as started:
        assert started and fake.up
    assert fake.calls == [("init", {"num_cpus": os.cpu_count(), "include_dashboard": False}),
                          ("shutdown", {})]


def test_an_address_is_connected_to_and_released():
    fake = FakeRay(initialized=False)
    with pytest.raises(RuntimeError):
        with distributed._ray_running(fake, "ray://head:10001", 4):
            raise RuntimeError("a failing batch still releases Ray")
    assert fake.calls == [("init", {"address": "ray://head:10001"}), ("shutdown", {})]


def test_a_running_ray_is_used_and_left_running():
    fake = FakeRay(initialized=True)
    with distributed._ray_running(fake, None, 2) as started:
        assert not started
    assert fake.calls == [] and fake.up
