"""Ray as a Ray user expects it: bounded in-flight tasks, Polars sized to each task's CPUs,
small results, no process-wide Ray Data setting changed; and the fleet on Ray."""

from __future__ import annotations

import logging
import pickle
import time

import pytest

import memframe as mf
from memframe import distributed
from memframe.digest import engines
from tests.fleet.conftest import NOW, build_fleet

from .conftest import many_partition_store

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


class Ref:
    def __init__(self, value):
        self.value = value


class QueueRay:
    """Just enough of Ray to count the tasks in flight: ``wait`` finishes the oldest."""

    def __init__(self, cpus: float):
        self.cpus, self.in_flight, self.peak, self.options = cpus, 0, 0, None

    def cluster_resources(self):
        return {"CPU": self.cpus}

    def remote(self, **options):
        self.options = options
        ray = self

        class Task:
            def __init__(self, fn):
                self.fn = fn

            def remote(self, *args):
                ray.in_flight += 1
                ray.peak = max(ray.peak, ray.in_flight)
                return Ref(self.fn(*args))

        return Task

    def wait(self, refs, num_returns=1):
        assert num_returns == 1 and refs
        return refs[:1], refs[1:]

    def get(self, ref):
        self.in_flight -= 1
        if isinstance(ref.value, Exception):
            raise ref.value
        return ref.value


def square(n):
    return (True, n * n) if n != 3 else (False, "ValueError: three")


@pytest.mark.parametrize("cpus, limit, want_peak", [(2, None, 4), (2, 3, 3), (8, 1, 1)])
def test_at_most_max_in_flight_tasks_are_submitted(cpus, limit, want_peak):
    fake = QueueRay(cpus)
    out = list(engines.ray_tasks(fake, square, [(n,) for n in range(20)], max_in_flight=limit))
    assert fake.peak == want_peak
    assert sorted(out) == sorted((n, n != 3, n * n if n != 3 else "ValueError: three")
                                 for n in range(20))
    assert fake.options == {"num_cpus": 1,
                            "runtime_env": {"env_vars": {"POLARS_MAX_THREADS": "1"}}}


def test_a_lost_task_fails_its_call_only():
    fake = QueueRay(2)
    lost = lambda n: RuntimeError("worker died") if n == 1 else (True, n)  # noqa: E731

    class Lossy(QueueRay):
        def remote(self, **options):
            task = super().remote(**options)
            return lambda fn: task(lost)

    fake = Lossy(2)
    out = dict((i, (ok, v)) for i, ok, v in engines.ray_tasks(fake, None, [(0,), (1,), (2,)],
                                                              max_in_flight=None))
    assert out == {0: (True, 0), 1: (False, "RuntimeError: worker died"), 2: (True, 2)}


def test_backpressure_on_a_real_ray(ray_local):
    def stamp(pause):
        start = time.monotonic()
        time.sleep(pause)
        return True, (start, time.monotonic())

    spans = [v for _, _, v in engines.ray_tasks(ray_local, stamp, [(0.3,)] * 4,
                                                 max_in_flight=1)]
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans


@pytest.mark.parametrize("cpus", [1, 2])
def test_each_task_runs_polars_on_its_own_cpus(ray_local, cpus):
    def threads():
        import os

        import polars as pl

        return True, (os.environ.get("POLARS_MAX_THREADS"), pl.thread_pool_size())

    [(_, ok, value)] = list(engines.ray_tasks(ray_local, threads, [()], max_in_flight=None,
                                              num_cpus=cpus))
    assert ok and value == (str(cpus), cpus)
    import os

    assert "POLARS_MAX_THREADS" not in os.environ  # the driver's environment is untouched


def test_rebuild_changes_no_process_wide_ray_data_setting(tmp_path, ray_local, monkeypatch):
    import ray.data

    context = ray.data.DataContext.get_current()
    names = ("enable_progress_bars", "use_datasource_v2", "print_on_execution_start",
             "enable_auto_log_stats")
    logger = logging.getLogger("ray.data")

    def settings():
        current = ray.data.DataContext.get_current()
        return current is context, {n: getattr(current, n) for n in names}, logger.level

    before = settings()
    during = []
    get = ray_local.get

    def watching_get(*args, **kwargs):  # the driver while the fold runs
        during.append(settings())
        return get(*args, **kwargs)

    monkeypatch.setattr(ray_local, "get", watching_get)
    store = many_partition_store(tmp_path / "s", commits=6, rows=20)
    report = distributed.rebuild_sessions(store, engine="ray", progress=False)
    assert report.rows_written > 0 and during
    assert all(seen == before for seen in during), (before, during)
    assert settings() == before


def test_a_digest_travels_as_its_wire_text(digest_stores):
    d = mf.digest(mf.Store.open(digest_stores[0]), now=NOW)
    light = pickle.dumps(d)
    assert len(light) < 1.2 * len(d.to_json().encode())  # the body once, no frames
    back = pickle.loads(light)
    assert (back.to_json(), back.hash, back.rows_visited, back.generation) == (
        d.to_json(), d.hash, d.rows_visited, d.generation)
    remote_like = mf.Digest(d.to_dict(), io={"requests": 3, "bytes_read": 10})
    assert pickle.loads(pickle.dumps(remote_like)).requests == 3
    same = mf.digest(mf.Store.open(digest_stores[0]), now=NOW, known_hash=d.hash)
    again = pickle.loads(pickle.dumps(same))
    assert again.unchanged and again.hash == d.hash and again.total == d.total


def test_digest_many_on_ray_with_a_small_limit_equals_one_by_one(digest_stores, ray_local):
    report = distributed.digest_many(digest_stores, engine="ray", progress=False, now=NOW,
                                     max_in_flight=1)
    assert report.ok
    for path in digest_stores:
        assert report.digests[path].to_json() == mf.digest(mf.Store.open(path),
                                                           now=NOW).to_json()


def test_digest_many_on_ray_writes_on_the_workers_with_keep_false(digest_stores, ray_local,
                                                                   tmp_path):
    report = distributed.digest_many(digest_stores, engine="ray", progress=False, now=NOW,
                                     out_dir=tmp_path / "out", keep=False)
    assert report.ok and report.digests == {}
    for path in digest_stores:
        here = mf.digest(mf.Store.open(path), now=NOW)
        assert report.written[path].read_text(encoding="utf-8") == here.to_json()
        assert report.hashes[path] == here.hash


@pytest.fixture(scope="module")
def fleet_paths(tmp_path_factory):
    return build_fleet(tmp_path_factory.mktemp("ray-fleet"))


def test_the_fleet_on_ray_equals_the_fleet_here(fleet_paths, ray_local):
    names = ["alpha", "beta", "gamma", "broken", "damaged", "notes", "missing"]
    paths = [fleet_paths[n] for n in names]
    local = mf.fleet(paths, now=NOW)
    on_ray = mf.fleet(paths, now=NOW, engine="ray", max_in_flight=2)
    assert on_ray.frame.equals(local.frame)
    assert on_ray.to_json() == local.to_json()
    assert len(on_ray.errors) == 3 and not on_ray.frame["chain_ok"].drop_nulls().all()
    listed = mf.fleet(fleet_paths["root"], now=NOW, engine="ray")
    assert listed.frame.equals(mf.fleet(fleet_paths["root"], now=NOW).frame)
