"""Delta Lake logs beside the canonical tables: each table directory is also a Delta table.

memframe's own log (``_log/``) stays the source of truth: it is the multi-table atomic
commit. Once a store has Delta logs enabled, every generation that adds or removes a
canonical table's partition files is mirrored, after it has landed, as the next version of
that table's ``<table>/_delta_log/`` (protocol 1/2 JSON commits: ``add`` and ``remove``
actions over the same immutable files, with the table's schema). So Spark, DuckDB's
``delta_scan``, ``pl.scan_delta`` and ``deltalake`` read exactly the rows memframe's
newest generation holds, with no recipe.

- **Mapping.** Version 0 of a table is its state at the generation Delta logs were
  enabled (or first seen); each later version mirrors one generation that touched the
  table, and its ``commitInfo.memframe.generation`` names that generation.
- **Order.** ``_log/_delta.json`` records the generation every table is mirrored through.
  A writer mirrors its own generation right after linking it; a crash in between leaves
  Delta behind, and the next commit (or `DeltaLogs.sync`, ``memframe delta sync``) writes
  the missing versions, in order. Versions are created exclusively (link), and two writers
  that mirror the same generation write the same actions, so a race is harmless.
- **Retention.** When vacuum deletes files, each table's Delta log gets a checkpoint at the
  first version that names no deleted file, and the JSON commits before it are removed (as
  Delta's own log cleanup does): a reader can open no version that names a missing file.
- **Timestamps.** Delta's ``timestamp`` is microseconds; memframe's files keep
  nanoseconds. Readers see instants truncated to microseconds; ``seq`` gives exact order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import hashlib
import json
import os
import re
import secrets
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from memframe import schema as S
from memframe.errors import ConcurrentCommitError, CorruptStoreError, DeltaLogsAheadError
from memframe.store import log as log_module
from memframe.store.log import Log, Snapshot

DELTA_LOG = "_delta_log"
#: under ``_log/``: Delta logs are kept, and every generation up to this one is mirrored
STATE_FILE = "_delta.json"
_VERSION_RE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_RE = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
_LAST_CHECKPOINT = "_last_checkpoint"
PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 2}
STATE_EVERY = 16  # generations between updates of the state file on the commit path
#: a Delta checkpoint every this many versions of a table, so readers replay at most as
#: many JSON commits (delta-rs's default interval)
CHECKPOINT_EVERY = 100

_DELTA_TYPES: dict[type[pl.DataType], str] = {
    pl.String: "string", pl.Int64: "long", pl.Int32: "integer", pl.Int16: "short",
    pl.Int8: "byte", pl.Float64: "double", pl.Float32: "float", pl.Boolean: "boolean",
    pl.Date: "date", pl.Datetime: "timestamp", pl.Binary: "binary",
}


class DeltaLogsBehind(UserWarning):
    """A generation landed but its Delta Lake versions could not be written (yet)."""


def schema_string(table: str) -> str:
    """The Delta ``schemaString`` of a canonical table (every column nullable).

    Examples:
        >>> json.loads(schema_string("recalls"))["fields"][3]
        {'name': 'count', 'type': 'long', 'nullable': True, 'metadata': {}}
    """
    fields = []
    for name, dtype in S.table_schema(table).items():
        kind: Any = _DELTA_TYPES.get(dtype.base_type())
        if isinstance(dtype, pl.List) and dtype.inner == pl.String:  # receipts' terms and ids
            kind = {"type": "array", "elementType": "string", "containsNull": True}
        if kind is None:  # a column type memframe does not write today
            raise CorruptStoreError(f"column {table}.{name} has type {dtype}, which has no "
                                    f"Delta Lake type here")
        fields.append({"name": name, "type": kind, "nullable": True, "metadata": {}})
    return json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))


@functools.cache
def schema_hash(table: str) -> str:
    """A short hash of the table's Delta schema, recorded in every version's commitInfo
    so a writer sees at once whether the log's schema is its own (else: a metaData)."""
    return hashlib.sha256(schema_string(table).encode()).hexdigest()[:16]


def version_name(version: int) -> str:
    return f"{version:020d}.json"


def _millis(stamp: str | None) -> int:
    """A memframe commit stamp (``...Z``) as Unix milliseconds (0 when absent)."""
    if not stamp:
        return 0
    instant = datetime.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(instant.replace(tzinfo=datetime.UTC).timestamp() * 1000)


def touched_tables(entry: Mapping[str, Any]) -> list[str]:
    """The canonical tables a generation file adds or removes partitions of, in order."""
    names = {add["table"] for add in entry.get("add", ())}
    names |= {p.split("/", 1)[0] for p in entry.get("remove", ()) if isinstance(p, str)}
    return [t for t in S.CANONICAL_TABLES if t in names]


@dataclasses.dataclass
class _Head:
    """What a handle knows of one table's Delta log: its newest version and the memframe
    generation that version mirrors."""

    version: int
    generation: int
    schema: str | None = None  # the hash of the table's Delta schema as of this version


class DeltaLogs:
    """The Delta logs of one store's canonical tables (one per `Store` handle)."""

    def __init__(self, log: Log):
        self._log = log
        self.root = log.root
        self._heads: dict[str, _Head] = {}
        self._hints: dict[str, _Head] = {}  # heads the state file remembered (may be old)
        self._synced: int | None = None  # the generation this handle mirrored through

    # -- state --------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self._log.log_dir / STATE_FILE

    def synced_through(self) -> int | None:
        """The generation every table is mirrored through; None when Delta logs are off.

        The state file also remembers each table's newest version, so a new handle finds
        it with a few probes instead of listing a long ``_delta_log``.
        """
        try:
            data = log_module.parse_json(self.state_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return 0  # torn by a crash: catch up from each table's own log
        if not isinstance(data, dict):
            return 0
        heads = data.get("heads")
        if isinstance(heads, dict):
            for table, pair in heads.items():
                if (table in S.CANONICAL_TABLES and isinstance(pair, list) and len(pair) == 2
                        and all(log_module.whole(v) for v in pair)):
                    self._hints[table] = _Head(pair[0], pair[1])
        value = data.get("synced_through")
        return value if log_module.whole(value) else 0

    def _write_state(self, generation: int) -> None:
        for table in S.CANONICAL_TABLES:  # every version up to the mark is durable first
            if self.table_dir(table).is_dir():
                log_module.fsync_dir(self.table_dir(table))
        known = {**self._hints, **self._heads}
        heads = {t: [h.version, h.generation] for t, h in sorted(known.items())}
        body = json.dumps({"delta_logs": 1, "synced_through": generation, "heads": heads},
                          separators=(",", ":")).encode()
        log_module.check_no_link(self.root, self._log.log_dir)
        log_module._write_atomic(self.state_path, body)

    def discard(self) -> None:
        """Remove the Delta logs of a store no generation was committed to (undo a
        create with ``delta_logs=True``); only the files this module writes go."""
        for table in S.CANONICAL_TABLES:
            directory = self.table_dir(table)
            if not directory.is_dir() or directory.is_symlink():
                continue
            for entry in os.scandir(directory):
                if (_VERSION_RE.match(entry.name) or _CHECKPOINT_RE.match(entry.name)
                        or entry.name == _LAST_CHECKPOINT
                        or log_module.TEMP_NAME_RE.match(entry.name)):
                    os.unlink(entry.path)
            with contextlib.suppress(OSError):
                directory.rmdir()
        self.state_path.unlink(missing_ok=True)
        self._heads.clear()
        self._synced = None

    def table_dir(self, table: str) -> Path:
        return self.root / table / DELTA_LOG

    def _writable_dir(self, table: str) -> Path:
        """The table's ``_delta_log``, refused (`CorruptStoreError`) when it or the table
        directory is a symbolic link: memframe would write its versions elsewhere."""
        directory = self.table_dir(table)
        log_module.check_no_link(self.root, directory)
        return directory

    # -- the Delta-ahead states ---------------------------------------------------------
    def _ahead_error(self, newest: int, why: str) -> DeltaLogsAheadError:
        return DeltaLogsAheadError(
            f"the Delta logs of {self.root} are ahead of its generation log: {why}, but "
            f"the newest generation in _log/ is {newest}. A generation file was lost from "
            f"_log/ (a restored backup, a copy taken mid-commit), so the Delta logs hold a "
            f"commit memframe no longer has; committing would reuse its number and Delta "
            f"readers would keep the lost rows. Nothing was written. Recover with `memframe "
            f"delta sync --rebuild {self.root}` (store.sync_delta_logs(rebuild=True)): it "
            f"discards the Delta logs and starts them again at generation {newest}")

    def check_ahead(self, newest: int) -> None:
        """Refuse (`DeltaLogsAheadError`) when the Delta logs mirror a generation past the
        newest one of ``_log/`` (``newest``, or a later one another writer linked since:
        a version is mirrored only after its generation links, so a mirrored generation
        the log does not have was lost from it)."""
        synced = self.synced_through()
        if synced is None:
            return
        marks = [(synced, f"_log/{STATE_FILE} says every table is mirrored through "
                          f"generation {synced}")]
        for table in S.CANONICAL_TABLES:
            head = self._head(table)
            if head is not None:
                marks.append((head.generation, f"Delta version {head.version} of {table} "
                                               f"mirrors generation {head.generation}"))
        top, why = max(marks, key=lambda m: m[0])
        if top > newest:
            newest = self._log.latest_generation(known=newest)
            if top > newest:
                raise self._ahead_error(newest, why)

    def before_link(self, generation: int) -> None:
        """Refuse to link ``generation`` when a Delta log already mirrors it (the caller
        holds the shared commit lock): a generation number Delta has mirrored is never
        reused."""
        if self._synced is not None and self._synced == generation - 1:
            return  # this handle mirrored the previous generation itself: nothing is past it
        self.check_ahead(generation - 1)

    def rebuild(self, snap: Snapshot) -> dict[str, Any]:
        """Discard every table's Delta log and start them again at ``snap`` (the recovery
        from a Delta-ahead state or a damaged Delta log; the caller holds the commit lock
        exclusively). A link planted as a ``_delta_log`` is removed, never followed."""
        rebuilt = []
        for table in S.CANONICAL_TABLES:
            directory = self.table_dir(table)
            log_module.check_no_link(self.root, directory.parent)
            if directory.is_symlink():
                directory.unlink()
                rebuilt.append(table)
                continue
            if not directory.is_dir():
                continue
            for entry in os.scandir(directory):
                if (_VERSION_RE.match(entry.name) or _CHECKPOINT_RE.match(entry.name)
                        or entry.name == _LAST_CHECKPOINT
                        or log_module.TEMP_NAME_RE.match(entry.name)):
                    os.unlink(entry.path)
            try:
                directory.rmdir()
            except OSError:  # files memframe did not write: kept aside, never deleted
                directory.rename(directory.with_name(f"{DELTA_LOG}.old-{secrets.token_hex(4)}"))
            rebuilt.append(table)
        self.state_path.unlink(missing_ok=True)
        self._heads.clear()
        self._hints.clear()
        self._synced = None
        self._write_state(0)
        return {**self.sync(snap), "rebuilt": rebuilt}

    # -- the commit path ----------------------------------------------------------------
    def after_land(self, entry: Mapping[str, Any], after: Snapshot) -> None:
        """Mirror a generation that just landed (the caller holds the shared commit lock).

        When an earlier generation was not mirrored (a writer crashed between its
        generation and its Delta versions), this catches up first. Never raises for a
        Delta write that fails: the generation has landed, and the next commit or
        ``memframe delta sync`` writes what is missing.
        """
        generation = after.generation
        if self._synced == generation - 1:
            synced: int | None = self._synced  # this handle mirrored everything before
        else:
            synced = self.synced_through()
        if synced is None or synced >= generation:
            return  # (a state file past this generation was refused before the link)
        try:
            if synced == generation - 1:
                for table in touched_tables(entry):
                    self._mirror(table, generation, entry, after)
                self._synced = generation
                # the state file moves now and then: a handle that finds it behind reads
                # the few generation files after it and finds each version already there
                if generation % STATE_EVERY == 0:
                    self._write_state(generation)
            else:
                self.sync(after)
        except (OSError, CorruptStoreError, ConcurrentCommitError, ValueError) as exc:
            # the generation has landed: say that Delta readers lag, and how to catch up
            warnings.warn(
                f"generation {generation} landed, but its Delta Lake versions were not "
                f"written ({exc}); Delta readers see the tables as before it until the next "
                f"commit or `memframe delta sync {self._log.root}` writes them",
                DeltaLogsBehind, stacklevel=4)

    # -- catch-up -----------------------------------------------------------------------
    def enable(self, snap: Snapshot) -> dict[str, Any]:
        """Start keeping Delta logs: version 0 of every canonical table is its state at
        ``snap`` (tables that already have a Delta log keep it), then catch up."""
        os.makedirs(self._log.log_dir, exist_ok=True)
        if self.synced_through() is None:
            self._write_state(0)
        return self.sync(snap, prune=True)

    def sync(self, snap: Snapshot, *, prune: bool = False) -> dict[str, Any]:
        """Write every Delta version missing up to ``snap``'s generation, in order.

        A table with no Delta log gets version 0 at ``snap``; a table whose log is behind
        gets one version per generation that touched it. With ``prune``, every table's log
        is also checked for versions naming files that are gone (`prune`).
        Returns ``{"generation": g, "versions": {table: versions written}}``.
        """
        self._heads.clear()
        target = snap.generation
        self.check_ahead(target)
        heads = {t: self._head(t) for t in S.CANONICAL_TABLES}
        written: dict[str, int] = {}
        synced = self.synced_through()
        if synced:  # every table is mirrored through it: read only the log after it
            start = min(synced, target)
        else:
            start = min((h.generation for h in heads.values() if h is not None), default=target)
        for g in range(start + 1, target + 1):
            entry = self._log.read_entry(g)
            for table in touched_tables(entry):
                head = heads.get(table)
                if head is not None and head.generation < g:
                    if self._mirror(table, g, entry, snap):
                        written[table] = written.get(table, 0) + 1
        for table, head in heads.items():
            if head is None and self._mirror(table, target, {}, snap):
                written[table] = written.get(table, 0) + 1
        if prune:  # a full read of each log: vacuum and the explicit sync, not commits
            for table in S.CANONICAL_TABLES:
                self.prune(table)
        if (self.synced_through() or 0) < target:
            self._write_state(target)
        self._synced = target
        return {"generation": target, "versions": written}

    # -- one table ----------------------------------------------------------------------
    def _head(self, table: str) -> _Head | None:
        """The table's newest Delta version (probing forward from what this handle saw)."""
        directory = self.table_dir(table)
        head = self._heads.get(table)
        if head is not None and not (directory / version_name(head.version)).exists():
            head = None  # the log was removed or pruned under this handle: list it again
        hint = self._hints.pop(table, None) if head is None else None
        if hint is not None and (directory / version_name(hint.version)).exists():
            head = self._mirrored(table, hint.version)
        if head is None:
            try:
                versions = [int(m.group(1)) for n in os.listdir(directory)
                            if (m := _VERSION_RE.match(n))]
            except FileNotFoundError:
                return None
            if not versions:
                return None
            newest = max(versions)
            head = self._mirrored(table, newest)
        while (directory / version_name(head.version + 1)).exists():
            head = self._mirrored(table, head.version + 1)
        self._heads[table] = head
        return head

    def _mirrored(self, table: str, version: int) -> _Head:
        """Delta version ``version`` of ``table``: the generation it mirrors, its schema."""
        path = self.table_dir(table) / version_name(version)
        for action in _read_actions(path, self.root):
            if isinstance(action, dict) and "commitInfo" in action:
                mark = (action["commitInfo"] or {}).get("memframe") or {}
                if log_module.whole(mark.get("generation")):
                    schema = mark.get("schema")
                    return _Head(version, int(mark["generation"]),
                                 schema if isinstance(schema, str) else None)
        raise CorruptStoreError(
            f"{path} is a Delta commit memframe did not write (its commitInfo names no "
            f"memframe generation); memframe owns this table's Delta log: move {path.parent} "
            f"away and run `memframe delta sync {self.root}` to write it again")

    def _mirror(self, table: str, generation: int, entry: Mapping[str, Any],
                snap: Snapshot) -> bool:
        """Write the version mirroring ``generation`` for ``table``; False if it exists.

        A table with no Delta log gets version 0: its whole state at ``snap`` (the caller
        passes ``snap`` at ``generation``).
        """
        head = self._head(table)
        if head is None:
            if self._put_version(table, 0, self._create_actions(table, snap)):
                self._heads[table] = _Head(0, snap.generation, schema_hash(table))
                return True
            head = self._head(table)  # another process started this log at the same time
            if head is None or head.generation < generation:
                raise ConcurrentCommitError(
                    f"another process started the Delta log of {table} at the same time; "
                    f"run `memframe delta sync {self.root}` again")
        while head.generation < generation:
            version = head.version + 1
            if self._put_version(table, version,
                                 self._commit_actions(table, generation, entry, head)):
                self._heads[table] = _Head(version, generation, schema_hash(table))
                if version % CHECKPOINT_EVERY == 0 and snap.generation == generation:
                    self._checkpoint(table, version, snap)
                return True
            self._heads.pop(table, None)  # another writer made it: look again
            head = self._head(table)
            if head is None:
                raise ConcurrentCommitError(f"the Delta log of {table} vanished while this "
                                            f"commit extended it; run `memframe delta sync`")
        return False

    def _put_version(self, table: str, version: int, lines: Sequence[dict[str, Any]]) -> bool:
        directory = self._writable_dir(table)
        directory.mkdir(parents=True, exist_ok=True)
        data = b"".join(json.dumps(a, separators=(",", ":")).encode() + b"\n" for a in lines)
        tmp = directory / f".tmp-{secrets.token_hex(8)}"
        try:
            log_module._write_file(tmp, data, fsync=True)
            os.link(tmp, directory / version_name(version))
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        # no directory fsync here: the state file's next move syncs every Delta directory
        # first, and a version whose name a power cut lost lies after that mark, where
        # the catch-up writes it again
        return True

    def _checkpoint(self, table: str, version: int, snap: Snapshot) -> None:
        """A checkpoint of ``table`` at ``version``, the state of ``snap`` (which that
        version mirrors)."""
        directory = self._writable_dir(table)
        metadata = self._metadata(table)
        if metadata is None:
            return  # no checkpoint: readers replay the JSON commits, as before
        adds = {p.path.split("/", 1)[1]: self._add(p.path, p.rows, False)["add"]
                for p in snap.parts(table)}
        _write_checkpoint(directory, _TableState(version, dict(PROTOCOL), metadata, adds))

    def _metadata(self, table: str) -> dict[str, Any] | None:
        """The table's metaData action (its id kept) with this code's schema; None when
        neither version 0 nor a checkpoint is there to give the id."""
        directory = self.table_dir(table)
        metadata = None
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError, CorruptStoreError):
            metadata = next((a["metaData"] for a in _read_actions(directory / version_name(0),
                                                                     self.root)
                             if "metaData" in a), None)
        if metadata is None:  # the commits before a vacuum's checkpoint are gone: it has it
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                last = int(json.loads((directory / _LAST_CHECKPOINT).read_bytes())["version"])
                metadata = _TableState.from_checkpoint(directory, last).metadata
        if metadata is None:
            return None
        return {**metadata, "schemaString": schema_string(table)}

    def _add(self, path: str, rows: int, data_change: bool) -> dict[str, Any]:
        st = os.stat(self.root / path)
        return {"add": {"path": path.split("/", 1)[1], "partitionValues": {},
                        "size": st.st_size, "modificationTime": int(st.st_mtime * 1000),
                        "dataChange": data_change,
                        "stats": json.dumps({"numRecords": rows})}}

    def _create_actions(self, table: str, snap: Snapshot) -> list[dict[str, Any]]:
        stamp = _millis(snap.timestamp)
        return [
            {"commitInfo": {"timestamp": stamp, "operation": "CREATE TABLE",
                            "operationParameters": {}, "isBlindAppend": True,
                            "memframe": {"generation": snap.generation, "operation": "enable",
                                         "schema": schema_hash(table)}}},
            {"protocol": dict(PROTOCOL)},
            {"metaData": {"id": str(uuid.uuid4()), "name": table,
                          "format": {"provider": "parquet", "options": {}},
                          "schemaString": schema_string(table), "partitionColumns": [],
                          "configuration": {}, "createdTime": stamp}},
            *(self._add(p.path, p.rows, True) for p in snap.parts(table)),
        ]

    def _commit_actions(self, table: str, generation: int, entry: Mapping[str, Any],
                        head: _Head) -> list[dict[str, Any]]:
        stamp = _millis(entry.get("timestamp"))
        # memframe extends tables with new columns: the version after such an upgrade
        # carries the new schema (files written before it read the column as null)
        metadata = self._metadata(table) if head.schema != schema_hash(table) else None
        evolved = [{"metaData": metadata}] if metadata is not None else []
        # from what the commit did (recorded by the writer), never from its operation name
        compaction = entry.get("compaction") is True
        removes = sorted(p.split("/", 1)[1] for p in entry.get("remove", ())
                         if isinstance(p, str) and p.split("/", 1)[0] == table)
        adds = [a for a in entry.get("add", ()) if a["table"] == table]
        return [
            {"commitInfo": {"timestamp": stamp,
                            "operation": "OPTIMIZE" if compaction else "WRITE",
                            "operationParameters": {}, "isBlindAppend": not removes,
                            "memframe": {"generation": generation,
                                         "operation": entry.get("operation"),
                                         "schema": schema_hash(table)}}},
            *evolved,
            *({"remove": {"path": name, "deletionTimestamp": stamp,
                          "dataChange": not compaction, "extendedFileMetadata": False}}
              for name in removes),
            *(self._add(a["path"], a["rows"], not compaction) for a in adds),
        ]

    # -- retention ----------------------------------------------------------------------
    def prune(self, table: str) -> int | None:
        """Make every Delta version a reader can open name only files that exist.

        Finds the first version from which no version names a missing file, writes a
        checkpoint there and removes the JSON commits (and checkpoints) before it, as
        Delta's own log cleanup does. Returns that version, or None when nothing was
        removed. A missing file the newest version still names is damage, and reported.

        Crash-safe at every step: the checkpoint and ``_last_checkpoint`` are durable
        before the first commit goes, and commits go oldest first, so every prefix of the
        deletion leaves a log that opens at its checkpoint. A log left starting with no
        checkpoint (a prune killed midway) is finished here: the commits before its first
        readable checkpoint are removed.
        """
        directory = self._writable_dir(table)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return None
        versions = sorted(int(m.group(1)) for n in names if (m := _VERSION_RE.match(n)))
        checkpoints = sorted(int(m.group(1)) for n in names if (m := _CHECKPOINT_RE.match(n)))
        if not versions:
            return None
        oldest = versions[0]
        if oldest and oldest not in checkpoints:
            resume = next((c for c in checkpoints if oldest < c <= versions[-1]
                           and c in versions and _checkpoint_readable(directory, c)), None)
            if resume is None:
                raise CorruptStoreError(
                    f"{directory} starts at version {oldest} with no checkpoint there or "
                    f"after it, so no reader can open it; run `memframe delta sync --rebuild "
                    f"{self.root}` to write the Delta logs again from the store")
            self._drop_before(directory, resume, versions, checkpoints)
            versions = [v for v in versions if v >= resume]
            checkpoints = [c for c in checkpoints if c >= resume]
            oldest = resume
        state = _TableState.from_checkpoint(directory, oldest) if oldest else _TableState()
        gone_at: dict[str, int] = {}  # every path named since the oldest version: removed when
        for path in state.adds:
            gone_at[path] = -1
        history: list[_TableState] = []
        for v in versions:
            if v != oldest or not oldest:
                state = state.apply(_read_actions(directory / version_name(v), self.root))
            for path in state.adds:
                gone_at.setdefault(path, -1)
            for path in state.removed_now:
                gone_at[path] = v
            history.append(state)
        first = 0
        for path, removed in gone_at.items():
            if (self.root / table / path).exists():
                continue
            if removed == -1:
                raise CorruptStoreError(
                    f"{table}/{path} is missing, and the newest Delta version of {table} "
                    f"still names it; the store is damaged: restore the file from a copy")
            first = max(first, removed)
        if first <= oldest:
            return None
        at = next(s for s in history if s.version == first)
        _write_checkpoint(directory, at)
        log_module.fsync_dir(directory)  # the checkpoint's name is durable before any delete
        self._drop_before(directory, first, versions, checkpoints)
        self._heads.pop(table, None)
        return first

    @staticmethod
    def _drop_before(directory: Path, first: int, versions: Sequence[int],
                     checkpoints: Sequence[int]) -> None:
        """Remove the commits and checkpoints before ``first`` (which has a durable
        checkpoint), oldest first: a kill at any step leaves a log that opens there."""
        for v in versions:
            if v < first:
                (directory / version_name(v)).unlink(missing_ok=True)
        for c in checkpoints:
            if c < first:
                (directory / f"{c:020d}.checkpoint.parquet").unlink(missing_ok=True)
        log_module.fsync_dir(directory)

    def status(self, newest: int) -> dict[str, Any]:
        """Whether Delta logs are kept, the generation every table is mirrored through
        (read from the log after the state file's mark), and per table the newest Delta
        version and the generation it mirrors (None: no Delta log)."""
        self._heads.clear()
        self.check_ahead(newest)
        synced = self.synced_through()
        heads = {t: self._head(t) for t in S.CANONICAL_TABLES}
        if synced is not None:
            while synced < newest:
                entry = self._log.read_entry(synced + 1)
                if any(heads[t] is None or heads[t].generation < synced + 1  # type: ignore[union-attr]
                       for t in touched_tables(entry)):
                    break
                synced += 1
        tables = {t: None if h is None else {"version": h.version, "generation": h.generation}
                  for t, h in heads.items()}
        return {"enabled": synced is not None, "synced_through": synced,
                "generation": newest, "tables": tables}


def _read_actions(path: Path, root: Path) -> list[dict[str, Any]]:
    """The actions of one Delta commit; a file that is not Delta's JSON lines is a
    `CorruptStoreError` naming it and the recovery."""
    try:
        actions = [log_module.parse_json(line) for line in path.read_bytes().splitlines()
                   if line.strip()]
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptStoreError(
            f"{path} is not a Delta commit (its lines are not JSON: {exc}); memframe owns "
            f"this table's Delta log: run `memframe delta sync --rebuild {root}` to write "
            f"the Delta logs again from the store") from None
    if not all(isinstance(a, dict) for a in actions):
        raise CorruptStoreError(
            f"{path} is not a Delta commit (a line is not a JSON object); run `memframe "
            f"delta sync --rebuild {root}` to write the Delta logs again from the store")
    return actions


@dataclasses.dataclass
class _TableState:
    """A table's Delta state at one version (protocol, metadata, the files it names)."""

    version: int = -1
    protocol: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    adds: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    removed_now: tuple[str, ...] = ()

    def apply(self, actions: Iterable[dict[str, Any]]) -> _TableState:
        adds = dict(self.adds)
        protocol, metadata, removed = self.protocol, self.metadata, []
        for action in actions:
            if "protocol" in action:
                protocol = action["protocol"]
            elif "metaData" in action:
                metadata = action["metaData"]
            elif "remove" in action:
                adds.pop(action["remove"]["path"], None)
                removed.append(action["remove"]["path"])
            elif "add" in action:
                adds[action["add"]["path"]] = action["add"]
        return _TableState(self.version + 1, protocol, metadata, adds, tuple(removed))

    @classmethod
    def from_checkpoint(cls, directory: Path, version: int) -> _TableState:
        import pyarrow.parquet as pq

        path = directory / f"{version:020d}.checkpoint.parquet"
        rows = pq.read_table(path, columns=["protocol", "metaData", "add"]).to_pylist()
        state = cls(version=version)
        for row in rows:
            if row["protocol"]:
                state.protocol = row["protocol"]
            if row["metaData"]:
                meta = dict(row["metaData"])
                meta["format"] = {"provider": meta["format"]["provider"],
                                  "options": dict(meta["format"]["options"] or [])}
                meta["configuration"] = dict(meta["configuration"] or [])
                state.metadata = meta
            if row["add"]:
                add = dict(row["add"])
                add["partitionValues"] = dict(add["partitionValues"] or [])
                add.pop("tags", None)
                state.adds[add["path"]] = add
        return state


def _checkpoint_readable(directory: Path, version: int) -> bool:
    """Whether the checkpoint at ``version`` reads whole (a torn one is not used)."""
    try:
        state = _TableState.from_checkpoint(directory, version)
    except Exception:  # noqa: BLE001 - any failure to read means: not a usable checkpoint
        return False
    return state.protocol is not None and state.metadata is not None


@functools.cache
def _checkpoint_schema() -> Any:
    """The Arrow schema of a classic Delta checkpoint (pyarrow is imported here: a process
    that writes no checkpoint, a session-start digest, never loads it)."""
    import pyarrow as pa

    str_map = pa.map_(pa.string(), pa.string())
    return pa.schema([
        ("txn", pa.struct([("appId", pa.string()), ("version", pa.int64()),
                           ("lastUpdated", pa.int64())])),
        ("add", pa.struct([("path", pa.string()), ("partitionValues", str_map),
                           ("size", pa.int64()), ("modificationTime", pa.int64()),
                           ("dataChange", pa.bool_()), ("stats", pa.string()),
                           ("tags", str_map)])),
        ("remove", pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()),
                              ("dataChange", pa.bool_()), ("extendedFileMetadata", pa.bool_()),
                              ("partitionValues", str_map), ("size", pa.int64())])),
        ("metaData", pa.struct([("id", pa.string()), ("name", pa.string()),
                                ("description", pa.string()),
                                ("format", pa.struct([("provider", pa.string()),
                                                      ("options", str_map)])),
                                ("schemaString", pa.string()),
                                ("partitionColumns", pa.list_(pa.string())),
                                ("configuration", str_map), ("createdTime", pa.int64())])),
        ("protocol", pa.struct([("minReaderVersion", pa.int32()),
                                ("minWriterVersion", pa.int32())])),
    ])


def _write_checkpoint(directory: Path, state: _TableState) -> None:
    """A classic single-file Delta checkpoint of ``state`` and ``_last_checkpoint``."""
    if state.protocol is None or state.metadata is None:
        raise CorruptStoreError(f"{directory} has no protocol or metadata at version "
                                f"{state.version}; move it away and run `memframe delta sync`")
    meta = dict(state.metadata)
    meta["format"] = {"provider": meta["format"]["provider"],
                      "options": list(meta["format"].get("options", {}).items())}
    meta["configuration"] = list(meta.get("configuration", {}).items())
    meta.setdefault("description", None)
    rows: list[dict[str, Any]] = [{"protocol": state.protocol}, {"metaData": meta}]
    for add in state.adds.values():
        rows.append({"add": {**add, "partitionValues": list(add["partitionValues"].items()),
                             "tags": None}})
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows, schema=_checkpoint_schema())
    target = directory / f"{state.version:020d}.checkpoint.parquet"
    tmp = directory / f".tmp-{secrets.token_hex(8)}"
    try:
        with open(tmp, "xb") as fh:
            pq.write_table(table, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    last = directory / _LAST_CHECKPOINT
    with contextlib.suppress(FileNotFoundError, ValueError, KeyError, TypeError):
        if int(json.loads(last.read_bytes())["version"]) > state.version:
            return  # a newer checkpoint stays the one readers start from
    log_module._write_atomic(last, json.dumps({"version": state.version,
                                                "size": table.num_rows}).encode())
