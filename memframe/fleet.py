"""The fleet frame: one row of figures per store, for whoever looks after many agents.

`fleet` takes store paths or URLs (or one directory or URL prefix, under which every store
is listed), digests each store at one instant ``now`` without writing anything, and
answers a :class:`Fleet`: a Polars frame with one row per store, sorted by path, plus
outlier flags. A store that cannot be read gives a row with its ``error`` and nulls
elsewhere; it never stops the fleet. With ``engine="ray"`` every row is computed by a Ray
task on a worker (at most ``max_in_flight`` at once, Polars sized to the task's CPUs), so
only the small rows reach the driver; the frame is the same as ``engine="local"``'s.

The columns (``FLEET_SCHEMA``), each read from the store's digest at ``now`` unless said:

========================  ==================================================================
``path``                  the store's path or URL, as given (or as listed)
``generation``            the generation the digest read
``committed_at``          when that generation was committed (the generation log)
``total``, ``live``       the digest's ``total``; its ``by_project`` ``live`` summed
``projects``              how many projects ``by_project`` holds
``handoffs``              ``handoff_total``
``handoff_age``           ``now`` minus the newest handoff's ``created_at`` (null: none)
``open_sessions``         the digest's ``open_sessions``
``oldest_open_age``       ``now`` minus the oldest open session's start (``brackets``)
``orphaned_open``         open sessions started more than ``orphan_after`` before ``now``
``ready``, ``blocked``,   the blocks-DAG totals (null when the DAG holds a cycle)
``done``
``dag_cycle``,            the DAG, or the mission graph, holds a cycle
``mission_cycle``
``chain_ok``,             the journal's hash chain verified; the first ``audit_seq`` that
``broken_seq``            does not (null when it verifies)
``quarantined``           capsules in the quarantined tier
``archive_candidates``    the digest's ``archive_candidates``
``misses_7d``             recall misses in the 7 days up to ``now`` (``recall_misses``)
``staged``                proposals awaiting review (the ``staged`` section's ``proposed``)
``drifted_sources``       corroborations whose verdict is ``drifted`` (``sources`` tallies)
``digest_rows``           Parquet rows the digest read (``Digest.rows_visited``)
``digest_requests``       object-store requests the digest made (null for a local store)
``stale_handoff``         flag: the newest handoff is older than ``stale_after``
``broken_chain``          flag: the journal's chain does not verify
``orphaned_sessions``     flag: an open session started more than ``orphan_after`` ago
``error``                 ``ExceptionType: message`` when the store could not be read
========================  ==================================================================

The flags are null on an error row, and ``stale_handoff`` is false for a store that never
had a handoff.

Examples:
    >>> import datetime as dt, os, tempfile
    >>> import memframe as mf
    >>> root = tempfile.mkdtemp()
    >>> clock = lambda: dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
    >>> a = mf.Store.create(os.path.join(root, "agents", "a"), clock=clock)
    >>> sid = a.session_start("team")
    >>> _ = a.session_finish(sid, handoff="next: ship the fix")
    >>> _ = mf.Store.create(os.path.join(root, "agents", "b"), clock=clock)
    >>> os.makedirs(os.path.join(root, "agents", "notes"))
    >>> now = dt.datetime(2026, 7, 20, tzinfo=dt.UTC)
    >>> f = mf.fleet(os.path.join(root, "agents"), now=now)
    >>> f.frame.select("total", "handoffs", "stale_handoff", "chain_ok").rows()
    [(1, 1, True, True), (0, 0, False, True)]
    >>> f.frame["handoff_age"][0]
    datetime.timedelta(days=19)
    >>> bad = mf.fleet([os.path.join(root, "agents", "notes")], now=now)
    >>> bad.errors[os.path.join(root, "agents", "notes")].split(":")[0]
    'NotAStoreError'
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import polars as pl

from memframe.digest.core import digest
from memframe.digest.params import validate_now
from memframe.errors import InvalidInputError
from memframe.store import Store
from memframe.text import rfc3339

__all__ = ["fleet", "Fleet", "list_stores", "store_row", "FLEET_SCHEMA", "FLEET_ENGINES",
           "STALE_AFTER", "ORPHAN_AFTER", "MISS_WINDOW"]

#: the engines of `fleet`: this process, or one Ray task per store
FLEET_ENGINES: tuple[str, ...] = ("local", "ray")
#: a newest handoff older than this is stale (the default of ``stale_after``)
STALE_AFTER = _dt.timedelta(days=7)
#: an open session started longer ago than this is orphaned (the default of ``orphan_after``)
ORPHAN_AFTER = _dt.timedelta(days=1)
#: the window ``misses_7d`` counts recall misses in
MISS_WINDOW = _dt.timedelta(days=7)

_UTC = pl.Datetime("ns", "UTC")
_RFC3339 = "%Y-%m-%dT%H:%M:%S%.fZ"
_AGE = pl.Duration("ns")

#: the row one store answers (computed where the store is read: a Ray worker, or here);
#: instants travel as RFC3339 text, exact to the nanosecond
_ROW_SCHEMA: dict[str, pl.DataType] = {
    "path": pl.String(), "generation": pl.Int64(), "committed_at": pl.String(),
    "total": pl.Int64(), "live": pl.Int64(), "projects": pl.Int64(), "handoffs": pl.Int64(),
    "newest_handoff_at": pl.String(), "open_sessions": pl.Int64(),
    "oldest_open_at": pl.String(),
    "orphaned_open": pl.Int64(), "ready": pl.Int64(), "blocked": pl.Int64(),
    "done": pl.Int64(), "dag_cycle": pl.Boolean(), "mission_cycle": pl.Boolean(),
    "chain_ok": pl.Boolean(), "broken_seq": pl.Int64(), "quarantined": pl.Int64(),
    "archive_candidates": pl.Int64(), "misses_7d": pl.Int64(), "staged": pl.Int64(),
    "drifted_sources": pl.Int64(), "digest_rows": pl.Int64(), "digest_requests": pl.Int64(),
    "error": pl.String(),
}

#: the columns of ``Fleet.frame``, in order
FLEET_SCHEMA: dict[str, pl.DataType] = {
    **{k: v for k, v in _ROW_SCHEMA.items()
       if k not in ("newest_handoff_at", "oldest_open_at", "error")}, "committed_at": _UTC,
    "handoff_age": _AGE, "oldest_open_age": _AGE,
    "stale_handoff": pl.Boolean(), "broken_chain": pl.Boolean(),
    "orphaned_sessions": pl.Boolean(), "error": pl.String(),
}
_ORDER = ["path", "generation", "committed_at", "total", "live", "projects", "handoffs",
          "handoff_age", "open_sessions", "oldest_open_age", "orphaned_open", "ready",
          "blocked", "done", "dag_cycle", "mission_cycle", "chain_ok", "broken_seq",
          "quarantined", "archive_candidates", "misses_7d", "staged", "drifted_sources",
          "digest_rows", "digest_requests", "stale_handoff", "broken_chain",
          "orphaned_sessions", "error"]
FLEET_SCHEMA = {k: FLEET_SCHEMA[k] for k in _ORDER}


# ---- where the stores are ------------------------------------------------------------------

def _local(path: str) -> str | None:
    """The local path of ``path`` (a plain path or a ``file://`` URL), or None for a URL
    of another scheme (object storage)."""
    if path.startswith("file://"):
        return urlparse(path).path
    return None if "://" in path else path


def list_stores(prefix: str | os.PathLike[str], *,
                storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Every store under a directory (or URL prefix), sorted; a store is not descended into.

    A directory that is itself a store lists itself. A URL prefix (``s3://``, ``gs://``,
    ``az://``) is listed by `memframe.store.objects.list_stores` (one listing per
    "directory" visited).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> root = tempfile.mkdtemp()
        >>> for name in ("b", "a/x", "a/y"):
        ...     _ = mf.Store.create(os.path.join(root, name))
        >>> [os.path.relpath(p, root) for p in list_stores(root)]
        ['a/x', 'a/y', 'b']
        >>> list_stores(os.path.join(root, "missing"))
        Traceback (most recent call last):
        ...
        memframe.errors.InvalidInputError: ... is not a directory; give a directory that holds stores (at any depth), or a list of store paths
    """
    text = os.fspath(prefix)
    local = _local(text)
    if local is None:
        from memframe.store.objects import list_stores as list_remote

        return list_remote(text, storage_options)
    if not os.path.isdir(local):
        raise InvalidInputError(
            f"{text!r} is not a directory; give a directory that holds stores (at any "
            f"depth), or a list of store paths")
    found = []
    for here, dirs, _ in os.walk(local):
        if Store.is_store(here):
            found.append(here)
            dirs[:] = []  # a store's own folders hold tables, never other stores
        dirs.sort()
    return sorted(found)


def _paths(paths_or_prefix: Any, storage_options: Mapping[str, Any] | None) -> list[str]:
    if isinstance(paths_or_prefix, (str, os.PathLike)):
        return list_stores(paths_or_prefix, storage_options=storage_options)
    if not isinstance(paths_or_prefix, Iterable):
        raise InvalidInputError(
            f"fleet reads a list of store paths or URLs, or one directory or URL prefix; "
            f"got {type(paths_or_prefix).__name__}")
    paths = []
    for p in paths_or_prefix:
        if not isinstance(p, (str, os.PathLike)):
            raise InvalidInputError(f"a store path is a string or a path, got {p!r:.80}")
        paths.append(os.fspath(p))
    return sorted(dict.fromkeys(paths))


# ---- one store's row -----------------------------------------------------------------------

def _open(target: str, storage_options: Mapping[str, Any] | None) -> Store:
    local = _local(target)
    if local is not None or storage_options is None:
        return Store.open(local or target)
    return Store.open(target, storage_options=dict(storage_options))


def _from_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """The figures of one store's digest body."""
    dag = body["dag"]
    mission = body.get("mission") or {}
    journal = body["journal"]
    handoff = body.get("handoff") or []
    sources = (body.get("sources") or {}).get("sources", [])
    per_vocabulary = {s["source_key"].split(":", 1)[0]: s["drifted"] for s in sources}
    dag_ok = dag["status"] == "ok"
    return {
        "total": body["total"],
        "live": sum(p["live"] for p in body["by_project"]),
        "projects": len(body["by_project"]),
        "handoffs": body.get("handoff_total", 0),
        "newest_handoff_at": handoff[0]["created_at"] if handoff else None,
        "open_sessions": body["open_sessions"],
        **{k: dag[f"{k}_total"] if dag_ok else None for k in ("ready", "blocked", "done")},
        "dag_cycle": dag["status"] == "cycle",
        "mission_cycle": mission.get("status") == "cycle",
        "chain_ok": journal["chain"] == "ok",
        "broken_seq": journal.get("broken_seq"),
        "quarantined": body["tiers"].get("quarantined", 0),
        "archive_candidates": body["archive_candidates"],
        "staged": (body.get("staged") or {}).get("proposed", 0),
        # every cursor of one vocabulary carries the same store-wide tally: count it once
        "drifted_sources": sum(per_vocabulary.values()),
    }


def _from_view(view: Any, now: _dt.datetime, orphan_after: _dt.timedelta) -> dict[str, Any]:
    """The figures the digest does not carry: open sessions' starts, the week's misses."""
    brackets = view.table("brackets").select("session_id", "event", "at")
    finished = brackets.filter(pl.col("event") == "finish").select("session_id")
    opened = (brackets.filter(pl.col("event") == "start").group_by("session_id")
              .agg(pl.col("at").min()).join(finished.unique(), on="session_id", how="anti"))
    misses = view.table("recall_misses").filter(
        pl.col("at").is_between(pl.lit(now - MISS_WINDOW), pl.lit(now), closed="right"))
    sessions, week = pl.collect_all([
        opened.select(rfc3339(pl.col("at").min()).alias("oldest_open_at"),
                      (pl.col("at") < pl.lit(now - orphan_after)).sum().alias("orphaned_open")),
        misses.select(pl.len().alias("misses_7d")),
    ])
    return {**sessions.row(0, named=True), "misses_7d": week.item()}


def store_row(path: str, target: str, now: _dt.datetime, orphan_after: _dt.timedelta,
              storage_options: Mapping[str, Any] | None = None) -> tuple[bool, dict[str, Any]]:
    """One store's row of the fleet frame (before the ages and flags), read without
    writing; a store that cannot be read answers ``{"path", "error"}``. Runs where the
    store is read: in this process, or as a Ray task. Always ``(True, row)``.

    Examples:
        >>> import datetime as dt, tempfile, os
        >>> now = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
        >>> store_row("x", os.path.join(tempfile.mkdtemp(), "none"), now, dt.timedelta(1))[1]["error"][:14]
        'NotAStoreError'
    """
    try:
        store = _open(target, storage_options)
        d = digest(store, now=now)
        view = store.at(d.generation) if d.generation else store.pinned()
        row = {
            "path": path,
            "generation": d.generation,
            "committed_at": view.committed_at,
            **_from_body(d.to_dict()),
            **_from_view(view, now, orphan_after),
            "digest_rows": d.rows_visited,
            "digest_requests": d.requests,  # None for a store on disk
        }
    except Exception as exc:  # noqa: BLE001 - one store's failure is its row, never the fleet's
        row = {"path": path, "error": f"{type(exc).__name__}: {exc}"}
    return True, row


# ---- many rows ------------------------------------------------------------------------------

def _rows_locally(calls: list[tuple[Any, ...]], progress: bool) -> list[dict[str, Any]]:
    from memframe.digest.engines import progress_bar

    bar = progress_bar(len(calls), progress, "fleet")
    rows = []
    for call in calls:
        rows.append(store_row(*call)[1])
        bar.update(1)
    bar.close()
    return rows


def _rows_on_ray(calls: list[tuple[Any, ...]], progress: bool, address: str | None,
                 num_cpus: int | None, max_in_flight: int | None) -> list[dict[str, Any]]:
    from memframe.digest.engines import import_ray, progress_bar, ray_running, ray_tasks

    ray = import_ray()
    rows: list[dict[str, Any]] = []
    with ray_running(ray, address, num_cpus):
        bar = progress_bar(len(calls), progress, "fleet")
        for index, ok, value in ray_tasks(ray, store_row, calls, max_in_flight=max_in_flight,
                                          bar=bar):
            rows.append(value if ok else {"path": calls[index][0], "error": value})
        bar.close()
    return rows


def _frame(rows: list[dict[str, Any]], now: _dt.datetime, stale_after: _dt.timedelta
           ) -> pl.DataFrame:
    """The rows as the fleet frame: ages against ``now``, the flags, sorted by path."""
    frame = pl.DataFrame([{k: r.get(k) for k in _ROW_SCHEMA} for r in rows],
                         schema=_ROW_SCHEMA, orient="row")
    read = pl.col("error").is_null()
    at = pl.lit(now, dtype=_UTC)
    return frame.with_columns(
        pl.col("committed_at", "newest_handoff_at", "oldest_open_at").str.to_datetime(
            _RFC3339, time_unit="ns", time_zone="UTC"),
    ).with_columns(
        (at - pl.col("newest_handoff_at")).cast(_AGE).alias("handoff_age"),
        (at - pl.col("oldest_open_at")).cast(_AGE).alias("oldest_open_age"),
    ).with_columns(
        pl.when(read).then((pl.col("handoff_age") > stale_after).fill_null(False))
        .alias("stale_handoff"),
        pl.when(read).then(~pl.col("chain_ok")).alias("broken_chain"),
        pl.when(read).then(pl.col("orphaned_open") > 0).alias("orphaned_sessions"),
    ).select(_ORDER).sort("path")


def _check_span(value: object, name: str) -> _dt.timedelta:
    if not isinstance(value, _dt.timedelta) or value < _dt.timedelta(0):
        raise InvalidInputError(
            f"{name} is a non-negative datetime.timedelta (for example timedelta(days=7)), "
            f"got {value!r:.80}")
    return value


def fleet(
    paths_or_prefix: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    engine: str = "local",
    now: _dt.datetime | None = None,
    stale_after: _dt.timedelta = STALE_AFTER,
    orphan_after: _dt.timedelta = ORPHAN_AFTER,
    storage_options: Mapping[str, Any] | None = None,
    address: str | None = None,
    num_cpus: int | None = None,
    max_in_flight: int | None = None,
    progress: bool = False,
) -> Fleet:
    """The fleet frame of many stores: one row of figures per store, read without writing.

    Args:
        paths_or_prefix: store paths or URLs, or one directory (or URL prefix such as
            ``s3://bucket/agents``) under which every store is listed (see `list_stores`).
        engine: ``"local"`` (this process, one store after another) or ``"ray"`` (one Ray
            task per store, computing its row on the worker).
        now: the instant every store is digested at and every age measured from; default
            the current UTC time. The same stores and ``now`` give an identical frame.
        stale_after: a newest handoff older than this sets ``stale_handoff`` (7 days).
        orphan_after: an open session started longer ago sets ``orphaned_sessions`` (1 day).
        storage_options: endpoint and credentials for object storage, passed to
            ``Store.open`` (default: the standard environment variables).
        address: a Ray cluster address (``engine="ray"``); without it a running Ray is
            used, else a local one is started for the call and stopped after it.
        num_cpus: CPUs of a local Ray started here (default: all of this machine's).
        max_in_flight: the most Ray tasks submitted at once (default: twice the CPUs).
        progress: a progress bar on stderr (only when stderr is a terminal).

    Returns:
        A :class:`Fleet`; its ``frame`` has the columns of ``FLEET_SCHEMA``.

    Raises:
        InvalidInputError: an unknown engine, a prefix that is not a directory, a bad
            ``now``, threshold or worker count.
        MemframeError: ``engine="ray"`` without Ray installed; ClusterError when Ray cannot
            be started or reached.

    Examples:
        >>> import datetime as dt, memframe as mf
        >>> from memframe.synth import sample_store_path
        >>> now = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
        >>> f = mf.fleet([sample_store_path()], now=now)
        >>> f.frame.select("total", "projects", "chain_ok", "error").row(0)
        (2959, 10, True, None)
        >>> mf.fleet([sample_store_path()], now=now, engine="ray").frame.equals(f.frame)  # doctest: +SKIP
        True
    """
    if engine not in FLEET_ENGINES:
        raise InvalidInputError(
            f"unknown engine {engine!r}; fleet runs on one of: {', '.join(FLEET_ENGINES)}")
    from memframe.digest.engines import check_workers

    check_workers(num_cpus)
    check_workers(max_in_flight, "max_in_flight")
    if engine == "local" and address is not None:
        raise InvalidInputError("address names a Ray cluster; pass engine='ray' with it")
    when = validate_now(_dt.datetime.now(_dt.UTC) if now is None else now)
    stale = _check_span(stale_after, "stale_after")
    orphan = _check_span(orphan_after, "orphan_after")
    paths = _paths(paths_or_prefix, storage_options)
    options = dict(storage_options) if storage_options is not None else None
    calls = [(p, p if _local(p) is None else os.path.abspath(_local(p) or p), when, orphan,
              options) for p in paths]
    rows = (_rows_on_ray(calls, progress, address, num_cpus, max_in_flight)
            if engine == "ray" and calls else _rows_locally(calls, progress))
    return Fleet(_frame(rows, when, stale), when, stale, orphan)


# ---- the answer -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Fleet:
    """The answer of :func:`fleet`.

    Attributes:
        frame: one row per store, sorted by path (columns: ``FLEET_SCHEMA``).
        now: the instant the stores were digested at.
        stale_after: the age past which a newest handoff is stale.
        orphan_after: the age past which an open session is orphaned.
    """

    frame: pl.DataFrame
    now: _dt.datetime
    stale_after: _dt.timedelta = STALE_AFTER
    orphan_after: _dt.timedelta = ORPHAN_AFTER

    @property
    def errors(self) -> dict[str, str]:
        """Store path -> error text, for every store that could not be read."""
        failed = self.frame.filter(pl.col("error").is_not_null())
        return dict(zip(failed["path"].to_list(), failed["error"].to_list(), strict=True))

    @property
    def flagged(self) -> pl.DataFrame:
        """The rows with at least one outlier flag set."""
        return self.frame.filter(
            pl.any_horizontal("stale_handoff", "broken_chain", "orphaned_sessions"))

    def to_dict(self) -> dict[str, Any]:
        """The fleet as plain values: instants as RFC3339 text, ages in seconds."""
        plain = self.frame.with_columns(
            *[rfc3339(pl.col(c)) for c, t in self.frame.schema.items() if t == _UTC],
            # nanoseconds / 1e9: one correctly rounded division, so whole seconds stay whole
            *[pl.col(c).dt.total_nanoseconds() / 1_000_000_000
              for c, t in self.frame.schema.items() if t == _AGE],
        )
        return {
            "now": rfc3339_of(self.now),
            "stale_after_seconds": self.stale_after.total_seconds(),
            "orphan_after_seconds": self.orphan_after.total_seconds(),
            "stores": plain.to_dicts(),
        }

    def to_json(self) -> str:
        """`to_dict` as compact JSON (the same text for the same stores and ``now``)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    def to_text(self, width: int = 80) -> str:
        """The fleet as a terminal table ``width`` columns wide (stored text made visible)."""
        from memframe._render import fleet_text

        return fleet_text(self.frame, now=self.now, stale_after=self.stale_after,
                          orphan_after=self.orphan_after, width=width)

    def to_html(self) -> str:
        """The fleet as one self-contained HTML overview page (stored text escaped)."""
        from memframe._render import fleet_html

        return fleet_html(self.frame, now=self.now, stale_after=self.stale_after,
                          orphan_after=self.orphan_after, as_page=True)

    def _repr_html_(self) -> str:
        from memframe._render import fleet_html

        return fleet_html(self.frame, now=self.now, stale_after=self.stale_after,
                          orphan_after=self.orphan_after)

    def __repr__(self) -> str:
        return (f"<Fleet stores={self.frame.height} failed={len(self.errors)} "
                f"flagged={self.flagged.height} now={rfc3339_of(self.now)}>")


def rfc3339_of(instant: _dt.datetime) -> str:
    """One instant as the frame's RFC3339 text (nanosecond-exact, trailing zeros cut)."""
    return pl.select(rfc3339(pl.lit(instant, dtype=_UTC))).item()
