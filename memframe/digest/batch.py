"""Digests in bulk: many stores in parallel processes, or many project fences of one
store in one pass (the processes and Ray tasks themselves: `memframe.digest.engines`)."""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memframe.digest import engines
from memframe.digest.assemble import assemble_roots
from memframe.digest.core import HEADLINES_DEFAULT, pinned_source
from memframe.digest.params import list_cap, validate_headlines, validate_verify
from memframe.digest.reads import whole_source
from memframe.digest.result import Digest
from memframe.errors import InvalidInputError

__all__ = ["per_project_digests", "digest_many", "BatchReport", "project_file_stem",
           "DIGEST_ENGINES"]


def per_project_digests(
    store: Any,
    depth: int,
    *,
    headlines: int | None = HEADLINES_DEFAULT,
    now: _dt.datetime | None = None,
    verify: str = "incremental",
) -> dict[str, Digest]:
    """One fenced digest per project subtree root at ``depth``, computed in one pass.

    The roots are the distinct project ids (of non-tombstoned capsules) cut at ``depth``
    ``/``-separated segments: with ``team/api/v2`` and ``team`` at depth 2 the roots are
    ``team`` and ``team/api``. Capsule state and the store-global sections are computed
    once; the fenced sections are group-bys over the roots (a capsule counts under every
    root whose fence holds it). Each digest is byte-identical to
    ``digest(store, project_prefix=root)`` at the same generation. A cut that is not a
    valid prefix (blank, or ending with ``/`` because of an empty segment) is skipped.
    ``rows_visited`` of each digest is the whole batch's read.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> clock = lambda: dt.datetime(2026, 7, 23, 12, tzinfo=dt.UTC)
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=clock)
        >>> _ = store.ingest([{"content": c, "source": "s", "anchor": "a", "project_id": p}
        ...                   for c, p in [("a", "team/api"), ("b", "team/web"), ("c", "solo")]])
        >>> digests = per_project_digests(store, 1)
        >>> sorted(digests), digests["team"].to_dict()["total"]
        (['solo', 'team'], 2)
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise InvalidInputError(f"depth must be a positive integer, got {depth!r}")
    n = validate_headlines(headlines)
    mode = validate_verify(verify)
    source = pinned_source(store, now, lambda view, t: whole_source(view, t, mode))
    bodies = assemble_roots(source, list_cap(n), depth)
    return {
        root: Digest(
            body,
            rows_visited=source.rows_visited(),
            generation=source.generation,
            project_prefix=root,
            headlines=n,
        )
        for root, body in bodies.items()
    }


@dataclass
class BatchReport:
    """What :func:`digest_many` did.

    Attributes:
        digests: store path -> its Digest, for every store that digested.
        failures: store path -> error text (``ExceptionType: message``), for the others.
        written: store path -> the JSON file written (when ``out_dir`` was given).
        hashes: store path -> its digest's hash, for every store that digested (also
            with ``keep=False``, when ``digests`` stays empty).
    """

    digests: dict[str, Digest] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    written: dict[str, Path] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every store digested."""
        return not self.failures


_SLUG_CHARS = 64


def project_file_stem(project_id: str) -> str:
    """A file name stem for one project's digest: readable, unique and bounded.

    Project ids may hold ``/``, ``..``, any Unicode and any length, and two ids may slug
    to the same text (``x/y`` and ``x__y``); the stem is a readable slug of at most 64
    characters plus 12 hex digits of the id's sha256, so different ids never share a file.

    Examples:
        >>> project_file_stem("team/api")
        'team__api-0c8d32151f42'
        >>> project_file_stem("x/y") != project_file_stem("x__y")
        True
        >>> len(project_file_stem("p" * 300)) <= 77
        True
    """
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", project_id.replace("/", "__")).strip("._")
    digest = hashlib.sha256(project_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug[:_SLUG_CHARS] or 'project'}-{digest}"


def prepare_out_dir(paths: list[str], out_dir: str | os.PathLike[str] | None) -> Path | None:
    """The folder a batch writes ``<store name>.json`` files into (created), or None.

    Store directory names must be unique, since they name the files.
    """
    if out_dir is None:
        return None
    names = [p.rstrip("/").rsplit("/", 1)[-1] if "://" in p else Path(p).name
             for p in paths]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidInputError(
            f"out_dir needs unique store directory names; {duplicates[0]!r} appears more "
            f"than once: digest those stores into separate out_dir folders"
        )
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InvalidInputError(
            f"out_dir {str(out)!r} names an existing file (or a file stands in its path); "
            f"out_dir is a folder that gets one JSON file per store: name a new or existing "
            f"directory"
        ) from None
    return out


#: the engines of `digest_many`: local worker processes, or one Ray task per store
DIGEST_ENGINES: tuple[str, ...] = ("ray", "processes")


def digest_many(
    store_paths: Iterable[str | os.PathLike[str]],
    engine: str = "processes",
    *,
    processes: int | None = None,
    num_cpus: int | None = None,
    address: str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    max_in_flight: int | None = None,
    keep: bool = True,
    **kwargs: Any,
) -> BatchReport:
    """Digest many stores, each on its own: in local worker processes, or as Ray tasks.

    Each store is digested alone (``memframe.digest(Store.open(path), **kwargs)``), so
    every result is identical to a one-by-one digest, whatever the engine. A store that
    fails (missing, not a store, damaged, a lost worker) is reported in ``failures`` with
    its error text and never stops the batch.

    Args:
        store_paths: the store directories. With a Ray cluster, every host must see them
            at the same path (shared storage); relative paths are made absolute.
        engine: ``"processes"`` (local worker processes, the default) or ``"ray"`` (one
            Ray task per store; ``pip install "ray[data]>=2.30"``, or ``pip install -e ".[ray]"`` from a checkout).
        processes: worker processes (default: CPU count, at most one per store).
        num_cpus: the same count under Ray's name: CPUs of a local Ray started here, or
            worker processes (give one of the two).
        address: a Ray cluster address (only with ``engine="ray"``). Without it, a
            running Ray is used, else a local one is started for this call and shut down
            after it.
        out_dir: when given, each digest's ``to_json()`` is written to
            ``<out_dir>/<store directory name>.json`` (directory names must be unique).
        progress: show a progress bar on stderr (only when stderr is a terminal).
        max_in_flight: with ``engine="ray"``, the most tasks submitted at once (default:
            twice the cluster's CPUs); the others wait on the driver. Each task reserves
            one CPU and runs Polars on one thread.
        keep: ``False`` (with ``out_dir``): each worker writes its store's file itself and
            answers only the file and the hash, so the driver's memory does not grow with
            the batch; ``digests`` stays empty, ``written`` and ``hashes`` are filled. With
            Ray across hosts, ``out_dir`` must be shared storage.
        **kwargs: passed to :func:`memframe.digest` (``headlines``, ``project_prefix``,
            ``now``, ``known_hash``).

    Returns:
        A :class:`BatchReport`: ``digests`` and ``failures`` by store path (in input
        order) and ``written`` files.

    Raises:
        MemframeError: ``engine="ray"`` without Ray installed.
        InvalidInputError: an unknown engine, ``address`` without Ray, a bad worker count
            or duplicate directory names with ``out_dir``.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> root = tempfile.mkdtemp()
        >>> for name in ("a", "b"):
        ...     _ = mf.Store.create(os.path.join(root, name))
        >>> paths = [os.path.join(root, n) for n in ("a", "b", "missing")]
        >>> now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> report = digest_many(paths, progress=False, now=now)
        >>> sorted(os.path.basename(p) for p in report.digests), len(report.failures)
        (['a', 'b'], 1)
        >>> report = digest_many(paths, engine="ray", progress=False, now=now)  # doctest: +SKIP
        >>> len(report.digests), len(report.failures)  # doctest: +SKIP
        (2, 1)
    """
    if engine not in DIGEST_ENGINES:
        raise InvalidInputError(
            f"unknown engine {engine!r}; digest_many runs on one of: {', '.join(DIGEST_ENGINES)}"
        )
    engines.check_workers(processes, "processes")
    engines.check_workers(num_cpus, "num_cpus")
    if processes is not None and num_cpus is not None and processes != num_cpus:
        raise InvalidInputError(
            f"processes={processes} and num_cpus={num_cpus} name the same worker count; "
            f"give one of them")
    workers = processes if processes is not None else num_cpus
    if engine == "processes" and address is not None:
        raise InvalidInputError("address names a Ray cluster; pass engine='ray' with it")
    # a URL stays as given (a path's normalisation would fold its '//')
    paths = [p if isinstance(p, str) and '://' in p else str(Path(p)) for p in store_paths]
    if not isinstance(keep, bool):
        raise InvalidInputError(f"keep is True or False; got {keep!r:.40}")
    if not keep and out_dir is None:
        raise InvalidInputError("keep=False writes each digest on its worker: give out_dir "
                                "(the folder for the files)")
    out = prepare_out_dir(paths, out_dir)
    report = BatchReport()
    if not paths:
        return report
    engines.check_workers(max_in_flight, "max_in_flight")
    there = None if keep else out
    results = (engines.on_ray(paths, workers, address, progress, kwargs, max_in_flight, there)
               if engine == "ray"
               else engines.on_processes(paths, workers, progress, kwargs, there))
    for path, ok, value in results:
        if not ok:
            report.failures[path] = value
        elif isinstance(value, Digest):
            report.digests[path] = value
            report.hashes[path] = value.hash
            if out is not None:
                name = path.rstrip("/").rsplit("/", 1)[-1]
                report.written[path] = engines.write_json(out, name, value.to_json())
        else:  # written by the worker
            report.written[path] = Path(value["written"])
            report.hashes[path] = value["hash"]
    report.digests = {p: report.digests[p] for p in paths if p in report.digests}
    report.failures = {p: report.failures[p] for p in paths if p in report.failures}
    report.written = {p: report.written[p] for p in paths if p in report.written}
    report.hashes = {p: report.hashes[p] for p in paths if p in report.hashes}
    return report