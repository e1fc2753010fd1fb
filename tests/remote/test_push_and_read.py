"""A store pushed to an S3 server reads exactly as the local store: every table, the
digest, time travel, diff, the doors and the audits; verbs on the remote are refused."""

from __future__ import annotations

import datetime as dt
import json
import shutil

import polars as pl
import pytest

import memframe as mf
from memframe import schema as S
from memframe.errors import (
    NotAStoreError,
    ReadOnlyStoreError,
    StoreExistsError,
)
from memframe.store.objects import Objects
from memframe.synth import sample_store_path

NOW = dt.datetime(2026, 6, 15, tzinfo=dt.UTC)


@pytest.fixture
def sample(tmp_path) -> mf.Store:
    shutil.copytree(sample_store_path(), tmp_path / "sample")
    return mf.Store.open(tmp_path / "sample")


def _same_frames(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.schema == b.schema and a.equals(b)


def test_the_server_refuses_a_second_create(s3_endpoint, bucket, s3_options):
    url = f"s3://{bucket}/x"
    remote = Objects(url, s3_options)
    assert remote.put("k", b"first", create=True) is True
    assert remote.put("k", b"second", create=True) is False
    assert remote.get("k") == b"first"
    # the same refusal on the wire: a signed HTTP PUT with If-None-Match: *
    import boto3
    import botocore.exceptions

    client = boto3.client("s3", endpoint_url=s3_endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    with pytest.raises(botocore.exceptions.ClientError) as refused:
        client.put_object(Bucket=bucket, Key="x/k", Body=b"third", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert remote.get("k") == b"first"


def test_every_read_of_a_pushed_store_equals_the_local_one(sample, bucket, s3_options):
    url = f"s3://{bucket}/agents/a1"
    report = sample.push(url, storage_options=s3_options)
    assert report["generations_pushed"] == [1, sample.generation]
    remote = mf.Store.open(url, storage_options=s3_options)
    assert isinstance(remote, mf.RemoteStore) and remote.url == url
    assert remote.generation == sample.generation
    for name in S.CANONICAL_TABLES:
        assert _same_frames(remote.table(name).collect(), sample.table(name).collect()), name
    assert _same_frames(remote.capsule_state().collect(), sample.capsule_state().collect())
    for verify in ("incremental", "full"):
        local = mf.digest(sample, now=NOW, verify=verify)
        there = mf.digest(remote, now=NOW, verify=verify)
        assert there.to_json() == local.to_json()
        assert there.rows_visited == local.rows_visited
        assert local.requests is None and there.requests >= 1
    assert _same_frames(remote.history(), sample.history())
    g = sample.generation - 3
    assert _same_frames(remote.at(g).table("capsules").collect(),
                        sample.at(g).table("capsules").collect())
    assert remote.diff(g).summary == sample.diff(g).summary
    assert _same_frames(remote.memory.sessions().rows, sample.memory.sessions().rows)
    assert _same_frames(mf.audit.recall_misses(remote).lifecycle,
                        mf.audit.recall_misses(sample).lifecycle)
    coverage = [mf.audit.recall_coverage(s, until="2026-06-15") for s in (remote, sample)]
    assert _same_frames(coverage[0].daily, coverage[1].daily)
    assert _same_frames(coverage[0].never_recalled, coverage[1].never_recalled)
    trust = [mf.audit.trust(s) for s in (remote, sample)]
    assert _same_frames(trust[0].recalled, trust[1].recalled)
    assert _same_frames(trust[0].expired, trust[1].expired)
    assert remote.io_counts()["requests"] > 0 and sample.io_counts() is None


def test_a_push_copies_only_what_is_new_and_readers_follow(tmp_path, clock, bucket, s3_options):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": str(i)} for i in range(5)])
    url = f"s3://{bucket}/s"
    first = store.push(url, storage_options=s3_options)
    remote = mf.Store.open(url, storage_options=s3_options)
    assert remote.generation == 1
    store.record_recall(["cap-1", "cap-2"])
    store.memory.run_cycle()
    second = store.push(url, storage_options=s3_options)
    assert second["generations_pushed"] == [2, store.generation]
    assert 0 < second["files"] < first["files"] + 10
    assert store.push(url, storage_options=s3_options)["generations_pushed"] is None
    # the handle opened before sees the new generations on its next call
    assert remote.generation == store.generation
    assert mf.digest(remote, now=NOW).to_json() == mf.digest(store, now=NOW).to_json()
    before = remote.io_counts()["requests"]
    again = mf.digest(remote, now=NOW)
    assert again.requests == remote.io_counts()["requests"] - before
    assert again.bytes_fetched == 0  # the generation is in the mirror already


def test_erasure_travels_with_the_next_push(tmp_path, clock, bucket, s3_options):
    secret = "the launch code is 0000-SECRET-1234"
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest([{"content": "keep", "source": "s", "anchor": "a"},
                  {"content": secret, "source": "s", "anchor": "b"}])
    url = f"s3://{bucket}/s"
    store.push(url, storage_options=s3_options)
    remote = Objects(url, s3_options)

    def remote_holds_secret() -> bool:
        return any(secret.encode() in (remote.get(k) or b"") for k, _ in remote.listing(""))

    assert remote_holds_secret()
    store.forget("cap-2", mode="purge")
    store.push(url, storage_options=s3_options)
    assert remote_holds_secret()  # the replaced partition stays until the local vacuum
    reader = mf.Store.open(url, storage_options=s3_options)
    assert reader.capsule_state().collect()["content"].to_list() == ["keep", None]
    store.vacuum()
    report = store.push(url, storage_options=s3_options)
    assert report["deleted"] >= 1
    assert not remote_holds_secret()
    # and a reader's mirror drops the erased file when it opens the store again
    reopened = mf.Store.open(url, storage_options=s3_options)
    mirrored = [p for p in reopened.path.rglob("*.parquet") if secret.encode() in p.read_bytes()]
    assert mirrored == []
    assert reopened.capsule_state().collect()["content"].to_list() == ["keep", None]


def test_verbs_on_a_remote_store_are_refused_and_name_push(sample, bucket, s3_options):
    url = f"s3://{bucket}/a"
    sample.push(url, storage_options=s3_options)
    remote = mf.Store.open(url, storage_options=s3_options)
    generation = remote.generation
    attempts = [lambda: remote.ingest({"content": "x", "source": "s", "anchor": "a"}),
                lambda: remote.forget("cap-1"), lambda: remote.vacuum(),
                lambda: remote.compact(), lambda: remote.memory.run_cycle(),
                lambda: remote.record_recall(["cap-1"]), lambda: remote.push(url)]
    for attempt in attempts:
        with pytest.raises(ReadOnlyStoreError, match="push"):
            attempt()
    assert Objects(url, s3_options).get(f"_log/{generation + 1:020d}.json") is None


def test_credentials_from_the_environment(sample, bucket, s3_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    url = f"s3://{bucket}/env"
    sample.push(url)
    assert mf.Store.open(url).generation == sample.generation


def test_what_is_not_a_store_or_not_this_store_is_refused(tmp_path, clock, bucket, s3_options):
    with pytest.raises(NotAStoreError, match="push"):
        mf.Store.open(f"s3://{bucket}/nothing", storage_options=s3_options)
    one = mf.Store.create(tmp_path / "one", clock=clock)
    one.ingest({"content": "a", "source": "s", "anchor": "a"})
    other = mf.Store.create(tmp_path / "other", clock=clock)
    other.ingest({"content": "b", "source": "s", "anchor": "b"})
    url = f"s3://{bucket}/shared"
    one.push(url, storage_options=s3_options)
    with pytest.raises(StoreExistsError, match="another store's history"):
        other.push(url, storage_options=s3_options)
    one.ingest({"content": "c", "source": "s", "anchor": "c"})
    one.push(url, storage_options=s3_options)
    with pytest.raises(StoreExistsError, match="ahead"):
        other.push(url, storage_options=s3_options)
    with pytest.raises(mf.errors.InvalidInputError, match="storage_options"):
        mf.Store.open(tmp_path / "one", storage_options=s3_options)
    with pytest.raises(mf.errors.InvalidInputError, match="push"):
        mf.Store.create(f"s3://{bucket}/new")


def test_a_store_published_again_at_the_same_url_is_not_read_from_an_old_mirror(
        tmp_path, clock, bucket, s3_options):
    url = f"s3://{bucket}/again"
    one = mf.Store.create(tmp_path / "one", clock=clock)
    one.ingest({"content": "first store", "source": "s", "anchor": "a"})
    one.push(url, storage_options=s3_options)
    assert mf.Store.open(url, storage_options=s3_options).table("capsules").collect()[
        "content"].to_list() == ["first store"]
    remote = Objects(url, s3_options)
    remote.delete_many(k for k, _ in remote.listing(""))
    two = mf.Store.create(tmp_path / "two", clock=clock)
    two.ingest({"content": "second store", "source": "s", "anchor": "a"})
    two.push(url, storage_options=s3_options)
    assert mf.Store.open(url, storage_options=s3_options).table("capsules").collect()[
        "content"].to_list() == ["second store"]


def test_file_urls_push_to_a_directory_that_opens_as_a_local_store(sample, tmp_path):
    url = f"file://{tmp_path}/copy"
    sample.push(url)
    copy = mf.Store.open(url)
    assert not isinstance(copy, mf.RemoteStore)
    assert mf.digest(copy, now=NOW).to_json() == mf.digest(sample, now=NOW).to_json()


def test_a_file_missing_remotely_is_named_by_its_url(tmp_path, clock, bucket, s3_options):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    store.ingest({"content": "a", "source": "s", "anchor": "a"})
    url = f"s3://{bucket}/damaged"
    store.push(url, storage_options=s3_options)
    [part] = [p.path for p in store.partitions("capsules")]
    Objects(url, s3_options).delete_many([part])
    remote = mf.Store.open(url, storage_options=s3_options)
    with pytest.raises(mf.errors.CorruptStoreError) as missing:
        remote.table("capsules").collect()
    assert f"{url}" in str(missing.value) and str(remote.path) not in str(missing.value)
    assert part in str(missing.value)


def test_two_pushers_never_both_land_a_generation(tmp_path, clock, bucket, s3_options):
    import threading

    from memframe.errors import ConcurrentCommitError

    stores = []
    for name in ("one", "two"):
        store = mf.Store.create(tmp_path / name, clock=clock)
        for i in range(8):
            store.ingest({"content": f"{name} {i}", "source": "s", "anchor": str(i)})
        stores.append(store)
    url = f"s3://{bucket}/contended"
    outcome: dict[str, object] = {}
    gate = threading.Barrier(2)

    def push(store: mf.Store) -> None:
        gate.wait()
        try:
            outcome[store.path.name] = store.push(url, storage_options=s3_options)
        except (ConcurrentCommitError, StoreExistsError) as exc:
            outcome[store.path.name] = exc

    threads = [threading.Thread(target=push, args=(s,)) for s in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [s for s in stores if isinstance(outcome[s.path.name], dict)]
    assert len(won) == 1, outcome
    remote = mf.Store.open(url, storage_options=s3_options)
    assert remote.table("capsules").collect().equals(won[0].table("capsules").collect())
    [lost] = [s for s in stores if s is not won[0]]
    with pytest.raises(StoreExistsError):
        lost.push(url, storage_options=s3_options)


def test_an_unknown_storage_option_is_refused_before_anything_is_read(sample, bucket,
                                                                       s3_options):
    with pytest.raises(mf.errors.InvalidInputError, match="colour"):
        sample.push(f"s3://{bucket}/x", storage_options={**s3_options, "colour": "red"})
    with pytest.raises(mf.errors.InvalidInputError, match="colour"):
        mf.Store.open(f"s3://{bucket}/x", storage_options={"colour": "red"})
    assert Objects(f"s3://{bucket}", s3_options).listing("") == []


def test_the_command_line_pushes_and_digests_a_url_without_writing_to_it(
        sample, bucket, s3_endpoint, monkeypatch, capsys):
    from memframe.cli import main

    for name, value in {"AWS_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": "testing",
                        "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1",
                        "AWS_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(name, value)
    url = f"s3://{bucket}/cli"
    assert main(["push", str(sample.path), url, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["generation"] == sample.generation
    assert main(["digest", url, "--format", "json"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == mf.digest(sample).to_json()
    assert "could not advance" not in out.err
    assert Objects(url).get(f"_log/{sample.generation + 1:020d}.json") is None
    assert main(["info", url, "--format", "json"]) == 0
    assert f'"path": "{url}"' in capsys.readouterr().out
