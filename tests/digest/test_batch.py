"""digest_many (process pool, out_dir, failures) and per_project_digests (one pass)."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from conftest import T0, Clock, put

import memframe as mf
from memframe.digest import digest_many, per_project_digests
from memframe.errors import InvalidInputError

NOW = T0 + dt.timedelta(days=1)


def nested(store):
    a = put(store, "api fact", project="team/api")
    b = put(store, "ACTIVE(t): api thread", project="team/api/v2", kind="task")
    c = put(store, "web epic", project="team/web", kind="epic")
    d = put(store, "team root note", project="team")
    e = put(store, "solo epic", project="solo", kind="epic")
    put(store, "sibling not in team", project="teamx")
    put(store, "empty segment", project="odd//deep")
    store.relate(b, c, "grounded_in")
    store.relate(a, b, "blocks")
    store.relate(d, a, "supersedes")
    store.record_recall([b, c, e])
    store.record_miss(["missing"], "abstain")
    sid = store.session_start("team/web")
    store.session_finish(sid, handoff="web handoff")


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_per_project_digests_equal_individual_fenced_digests(store, depth):
    nested(store)
    batch = per_project_digests(store, depth, now=NOW, headlines=2)
    assert batch, "no roots"
    for root, digest in batch.items():
        single = mf.digest(store, project_prefix=root, now=NOW, headlines=2)
        assert digest.to_json() == single.to_json(), root
        assert digest.project_prefix == root


def test_per_project_roots_are_cuts_at_depth(store):
    nested(store)
    assert sorted(per_project_digests(store, 1, now=NOW)) == ["odd", "solo", "team", "teamx"]
    assert sorted(per_project_digests(store, 2, now=NOW)) == [
        "solo", "team", "team/api", "team/web", "teamx"]  # "odd/" is not a valid prefix
    team = per_project_digests(store, 2, now=NOW)["team"].to_dict()
    assert team["total"] == 5  # api, api/v2, web, team, and the web handoff
    assert "recent_failures" not in team


def test_per_project_rejects_bad_depth(store):
    with pytest.raises(InvalidInputError):
        per_project_digests(store, 0)


def test_digest_many_runs_each_store_and_reports_failures(tmp_path):
    paths = []
    for name, count in (("alpha", 1), ("beta", 3)):
        store = mf.Store.create(tmp_path / name, clock=Clock())
        for i in range(count):
            put(store, f"{name} capsule {i}")
        paths.append(store.path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "memframe.json").write_text("not json")
    out = tmp_path / "out"
    report = digest_many([*paths, broken, tmp_path / "missing"], out_dir=out,
                         processes=2, progress=False, now=NOW, headlines=2)
    assert not report.ok
    assert sorted(report.failures) == sorted([str(broken), str(tmp_path / "missing")])
    for path in paths:
        here = mf.digest(mf.Store.open(path), now=NOW, headlines=2).to_json()
        assert report.digests[str(path)].to_json() == here
        assert (out / f"{path.name}.json").read_text(encoding="utf-8") == here
    assert json.loads((out / "beta.json").read_text())["total"] == 3
    assert sorted(p.name for p in out.iterdir()) == ["alpha.json", "beta.json"]


def test_digest_many_with_keep_false_writes_on_the_workers_and_keeps_only_hashes(tmp_path):
    paths = []
    for name, count in (("alpha", 2), ("beta", 4)):
        store = mf.Store.create(tmp_path / name, clock=Clock())
        for i in range(count):
            put(store, f"{name} capsule {i}")
        paths.append(store.path)
    out = tmp_path / "out"
    report = digest_many([*paths, tmp_path / "missing"], out_dir=out, keep=False,
                         processes=2, progress=False, now=NOW)
    assert report.digests == {} and list(report.failures) == [str(tmp_path / "missing")]
    for path in paths:
        here = mf.digest(mf.Store.open(path), now=NOW)
        assert report.written[str(path)] == out / f"{path.name}.json"
        assert report.written[str(path)].read_text(encoding="utf-8") == here.to_json()
        assert report.hashes[str(path)] == here.hash
    kept = digest_many(paths, progress=False, now=NOW)
    assert kept.hashes == report.hashes
    with pytest.raises(InvalidInputError, match="out_dir"):
        digest_many(paths, keep=False, progress=False)


def test_digest_many_refuses_colliding_output_names(tmp_path):
    with pytest.raises(InvalidInputError, match="unique"):
        digest_many([tmp_path / "a" / "s", tmp_path / "b" / "s"], out_dir=tmp_path / "o",
                     progress=False)


def test_digest_many_of_nothing_is_empty():
    report = digest_many([], progress=False)
    assert report.ok and report.digests == {}


def test_one_batch_digest_function_for_every_engine(tmp_path):
    from memframe import distributed
    from memframe.errors import InvalidInputError

    assert distributed.digest_many is digest_many  # one function, engine=...
    with pytest.raises(InvalidInputError, match="unknown engine 'threads'"):
        digest_many([], engine="threads")
    with pytest.raises(InvalidInputError, match="give one of them"):
        digest_many([], processes=2, num_cpus=3)
    with pytest.raises(InvalidInputError, match="processes must be a positive integer"):
        digest_many([], processes=0)
    with pytest.raises(InvalidInputError, match="pass engine='ray'"):
        digest_many([], address="auto")
