"""The generation log: commit, pin, time travel, checkpoints, recovery.

A store is a directory. Each commit writes its new partition files first (unique names),
then creates the next generation file ``_log/<20 digits>.json`` exclusively by hard-linking
a fully written temporary file to that name: the link either creates the name or fails
because another writer got there first, so a generation file is never seen half written.
Readers list ``_log`` and replay generation files from the newest checkpoint; partition
files that no generation names (a crashed writer's) are invisible and removed by vacuum.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memframe.errors import (
    CorruptStoreError,
    GenerationNotFoundError,
    NotAStoreError,
    StoreExistsError,
)

FORMAT_NAME = "memframe-store"
FORMAT_VERSION = 1
MARKER = "memframe.json"
LOG_DIR = "_log"
CHECKPOINT_EVERY = 100

_GEN_RE = re.compile(r"^(\d{20})\.json$")
_CKPT_RE = re.compile(r"^_checkpoint\.(\d{20})\.json$")


@dataclasses.dataclass(frozen=True)
class Part:
    """One immutable partition file named by the log."""

    path: str  # relative to the store root, "/"-separated
    rows: int
    seq_lo: int | None = None
    seq_hi: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "rows": self.rows, "seq": [self.seq_lo, self.seq_hi]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Part:
        lo, hi = data.get("seq") or (None, None)
        return cls(path=data["path"], rows=int(data["rows"]), seq_lo=lo, seq_hi=hi)


def _sort_key(part: Part) -> tuple[int, str]:
    return (part.seq_lo if part.seq_lo is not None else -1, part.path)


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Everything a reader needs to see a store as it was at one generation."""

    generation: int
    timestamp: str | None
    tables: Mapping[str, tuple[Part, ...]]
    counters: Mapping[str, Any]
    watermarks: Mapping[str, Any]

    def parts(self, table: str) -> tuple[Part, ...]:
        return self.tables.get(table, ())

    def counter(self, name: str, default: Any = 0) -> Any:
        return self.counters.get(name, default)

    def apply(self, entry: Mapping[str, Any]) -> Snapshot:
        """The snapshot after one generation file's changes."""
        # only the tables this generation touches are rebuilt: replay stays linear
        tables = dict(self.tables)
        removed = set(entry.get("remove", ()))
        added: dict[str, list[Part]] = {}
        for add in entry.get("add", ()):
            added.setdefault(add["table"], []).append(Part.from_json(add))
        touched = set(added) | {path.rsplit("/", 1)[0] for path in removed}
        for name in touched:
            parts = [p for p in tables.get(name, ()) if p.path not in removed]
            parts.extend(added.get(name, ()))
            if parts:
                tables[name] = tuple(sorted(parts, key=_sort_key))
            else:
                tables.pop(name, None)
        return Snapshot(
            generation=int(entry["generation"]),
            timestamp=entry.get("timestamp"),
            tables=tables,
            counters=dict(entry.get("counters", self.counters)),
            watermarks=dict(entry.get("watermarks", self.watermarks)),
        )

    def to_checkpoint(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "timestamp": self.timestamp,
            "tables": {n: [p.to_json() for p in ps] for n, ps in self.tables.items()},
            "counters": dict(self.counters),
            "watermarks": dict(self.watermarks),
        }

    @classmethod
    def from_checkpoint(cls, data: Mapping[str, Any]) -> Snapshot:
        return cls(
            generation=int(data["generation"]),
            timestamp=data.get("timestamp"),
            tables={
                n: tuple(sorted((Part.from_json(p) for p in ps), key=_sort_key))
                for n, ps in data["tables"].items()
            },
            counters=dict(data["counters"]),
            watermarks=dict(data["watermarks"]),
        )


EMPTY = Snapshot(generation=0, timestamp=None, tables={}, counters={}, watermarks={})


def gen_name(generation: int) -> str:
    return f"{generation:020d}.json"


class Log:
    """Reads and appends generation files of one store directory."""

    def __init__(self, root: Path):
        self.root = root
        self.log_dir = root / LOG_DIR

    # -- creation / identification ------------------------------------------------------
    @staticmethod
    def create(root: Path, exist_ok: bool = False) -> Log:
        root = Path(root)
        if exist_ok and (root / MARKER).exists():
            return Log.open(root)
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            what = "a store already" if (root / MARKER).exists() else "files"
            raise StoreExistsError(
                f"{root} already holds {what}; open it with Store.open(path), or pick an "
                f"empty or new directory for Store.create"
            )
        (root / LOG_DIR).mkdir(parents=True, exist_ok=True)
        marker = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
        _write_atomic(root / MARKER, json.dumps(marker).encode())
        return Log(root)

    @staticmethod
    def open(root: Path) -> Log:
        root = Path(root)
        marker = root / MARKER
        if not marker.is_file():
            hint = "it does not exist" if not root.exists() else f"it has no {MARKER}"
            raise NotAStoreError(
                f"{root} is not a memframe store ({hint}); create one with "
                f"mf.Store.create(path) or `memframe synth PATH`"
            )
        try:
            data = json.loads(marker.read_text())
        except (OSError, ValueError) as exc:
            raise NotAStoreError(f"{marker} is not a readable format marker: {exc}") from None
        if data.get("format") != FORMAT_NAME:
            raise NotAStoreError(f"{marker} names format {data.get('format')!r}, not {FORMAT_NAME!r}")
        if data.get("version") != FORMAT_VERSION:
            raise NotAStoreError(
                f"{root} is format version {data.get('version')}; this memframe reads version "
                f"{FORMAT_VERSION}: upgrade memframe"
            )
        return Log(root)

    # -- reading ------------------------------------------------------------------------
    def _listing(self) -> tuple[list[int], list[int]]:
        gens: list[int] = []
        ckpts: list[int] = []
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            raise CorruptStoreError(f"{self.log_dir} is missing; the store is damaged") from None
        for name in names:
            m = _GEN_RE.match(name)
            if m:
                gens.append(int(m.group(1)))
                continue
            m = _CKPT_RE.match(name)
            if m:
                ckpts.append(int(m.group(1)))
        return gens, ckpts

    def latest_generation(self, known: int | None = None) -> int:
        """The newest generation. With ``known`` (a generation already seen), probe forward
        from it instead of listing the log, so the cost follows new commits, not history."""
        if known is not None:
            g = known
            while os.path.exists(self.log_dir / gen_name(g + 1)):
                g += 1
            return g
        gens, _ = self._listing()
        return max(gens, default=0)

    def read_entry(self, generation: int) -> dict[str, Any]:
        path = self.log_dir / gen_name(generation)
        try:
            return json.loads(path.read_bytes())
        except FileNotFoundError:
            raise GenerationNotFoundError(
                f"generation {generation} is not in {self.root}'s log"
            ) from None
        except ValueError as exc:
            raise CorruptStoreError(f"{path} is not valid JSON: {exc}") from None

    def snapshot(self, generation: int | None = None, *, base: Snapshot | None = None) -> Snapshot:
        """The snapshot at ``generation`` (default: newest), replaying from a checkpoint.

        ``base`` (an older snapshot of this store, e.g. a handle's cache) is used instead
        of a checkpoint when it is closer.
        """
        if (base is not None and generation is not None
                and 0 <= generation - base.generation <= CHECKPOINT_EVERY):
            snap = base  # a short tail: replay it without listing the log
            for g in range(base.generation + 1, generation + 1):
                snap = snap.apply(self.read_entry(g))
            return snap
        gens, ckpts = self._listing()
        latest = max(gens, default=0)
        target = latest if generation is None else generation
        if target < 0 or target > latest:
            raise GenerationNotFoundError(
                f"generation {target} does not exist in {self.root}: the newest is {latest}"
            )
        if base is not None and base.generation == target:
            return base
        start = EMPTY
        usable = [c for c in ckpts if c <= target]
        if usable:
            start = self._read_checkpoint(max(usable)) or EMPTY
        if base is not None and start.generation <= base.generation <= target:
            start = base
        snap = start
        for g in range(start.generation + 1, target + 1):
            snap = snap.apply(self.read_entry(g))
        return snap

    def _read_checkpoint(self, generation: int) -> Snapshot | None:
        path = self.log_dir / f"_checkpoint.{generation:020d}.json"
        try:
            return Snapshot.from_checkpoint(json.loads(path.read_bytes()))
        except (OSError, ValueError, KeyError):
            return None  # a checkpoint is an optimisation: fall back to replay

    def generation_for_instant(self, instant: str) -> int:
        """The newest generation whose commit timestamp is <= instant (ISO text, UTC)."""
        lo, hi = 1, self.latest_generation()
        found = 0
        while lo <= hi:  # commit timestamps are monotone (enforced at commit)
            mid = (lo + hi) // 2
            stamp = self.read_entry(mid)["timestamp"]
            if stamp <= instant:
                found, lo = mid, mid + 1
            else:
                hi = mid - 1
        return found

    # -- writing ------------------------------------------------------------------------
    def try_commit(self, entry: Mapping[str, Any]) -> bool:
        """Create generation ``entry['generation']`` exclusively; False if another won."""
        data = json.dumps(entry, separators=(",", ":"), sort_keys=False).encode()
        tmp = self.log_dir / f".tmp-{secrets.token_hex(8)}"
        _write_file(tmp, data, fsync=True)
        try:
            os.link(tmp, self.log_dir / gen_name(int(entry["generation"])))
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(self.log_dir)
        return True

    def write_checkpoint(self, snap: Snapshot) -> None:
        path = self.log_dir / f"_checkpoint.{snap.generation:020d}.json"
        _write_atomic(path, json.dumps(snap.to_checkpoint(), separators=(",", ":")).encode())

    def referenced_paths(self, generations: Iterable[Snapshot]) -> set[str]:
        out: set[str] = set()
        for snap in generations:
            for parts in snap.tables.values():
                out.update(p.path for p in parts)
        return out


def _write_file(path: Path, data: bytes, *, fsync: bool) -> None:
    with open(path, "xb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".tmp-{secrets.token_hex(8)}")
    _write_file(tmp, data, fsync=True)
    os.replace(tmp, path)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
