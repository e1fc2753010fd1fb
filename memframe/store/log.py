"""The generation log: commit, pin, time travel, checkpoints, recovery.

A store is a directory. Each commit writes its new partition files first (unique names),
then creates the next generation file ``_log/<20 digits>.json`` exclusively by hard-linking
a fully written temporary file to that name: the link either creates the name or fails
because another writer got there first, so a generation file is never seen half written.
Readers list ``_log`` and replay generation files from the newest checkpoint; partition
files that no generation names (a crashed writer's) are invisible and removed by vacuum.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import math
import os
import re
import secrets
import shlex
import stat
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from memframe.errors import (
    ConcurrentCommitError,
    CorruptStoreError,
    GenerationNotFoundError,
    NotAStoreError,
    StorageError,
    StorageFullError,
    StorageNotWritableError,
    StoreExistsError,
)
from memframe.store import fingerprint

FORMAT_NAME = "memframe-store"
FORMAT_VERSION = 1
MARKER = "memframe.json"
LOG_DIR = "_log"
CHECKPOINT_EVERY = 100

LOCK_FILE = ".lock"
#: the fairness ticket: held exclusively (flock) by one writer whose commit keeps losing
#: the race (or by vacuum); every other commit waits at it, for a bound, before it starts
PENDING_FILE = ".pending"
#: how long a commit waits behind another writer's ticket before it goes ahead anyway
TICKET_WAIT_SECONDS = 5.0
#: losers first: a writer whose commit lost a race holds it shared (flock) until that
#: commit ends, and a new commit's first attempt waits while any writer does
LOSERS_FILE = ".losers"
#: how long a new commit waits for the losers' retries before it races them anyway
LOSER_WAIT_SECONDS = 0.25
#: a push holds it shared while it copies the store's files; a vacuum that removes files
#: without the commit lock holds it exclusively meanwhile, or takes the commit lock
PUSH_FILE = ".push"

# how the ticket and the losers' mark are probed: never through a planted link, and never
# blocking in open (a FIFO planted under that name would hold every commit for ever)
_PROBE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


def _flock_within(fd: int, operation: int, wait_seconds: float) -> bool:
    """Take ``operation`` (``fcntl.LOCK_SH`` or ``LOCK_EX``) on ``fd``, polling until
    ``wait_seconds`` have passed: whether it was taken. The locks memframe waits for are
    held by small commits, so a millisecond's poll takes them as they end."""
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.001)

# the names memframe writes, in ASCII and whole (``\Z``: no line break after them); a
# partition's name has no anchors because it is matched with ``fullmatch`` from where its
# table's directory ends
_GEN_RE = re.compile(r"^([0-9]{20})\.json\Z")
_CKPT_RE = re.compile(r"^_checkpoint\.([0-9]{20})\.json\Z")
PART_NAME_RE = re.compile(r"part-[0-9]{20}-[0-9]{4}-[0-9a-f]{12}\.parquet")
TEMP_NAME_RE = re.compile(r"^\.tmp-[0-9a-f]{16}\Z")
# a canonical table ("capsules") or a derived one ("projections/session/L0")
TABLE_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(?:/[A-Za-z0-9_]+)*\Z")
_ENTRY_KEYS = frozenset({"generation", "timestamp", "add", "remove", "counters", "watermarks"})
# what a generation file may hold: counters are whole numbers >= 0 (the chain is text), a
# commit stamp is fixed-width UTC text, watermarks are bounded JSON (see watermark_problem)
COUNTER_NAMES = ("seq", "capsules", "sessions", "audit_seq")
MAX_INT = 2**63 - 1  # every counter, seq and row count fits an int64 column
_STAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$")
_WATERMARK_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_@.=:/-]{0,199}$")
WATERMARK_DEPTH = 8
WATERMARK_ITEMS = 10_000


def whole(value: Any, *, lo: int = 0) -> bool:
    """Whether ``value`` is an int (not a bool) in ``lo..MAX_INT``.

    Examples:
        >>> whole(3), whole(True), whole(-1), whole(2**64), whole(3.0)
        (True, False, False, False, False)
    """
    return type(value) is int and lo <= value <= MAX_INT


def watermark_problem(name: Any, value: Any) -> str | None:
    """Why ``name: value`` cannot be a watermark, or None when it can.

    A watermark is a whole number >= 0 (the highest ``seq`` a job folded) or a JSON
    object of a job's own marks: text keys; leaves that are null, booleans, finite
    numbers or text; at most 8 levels deep and 10,000 items. Names are a table-like path
    (``projections/session``, ``projections/digest/globals/graph@4``).

    Examples:
        >>> watermark_problem("projections/session", 12) is None
        True
        >>> watermark_problem("projections/session", "12")
        "its value is str '12'; a watermark is a whole number >= 0 or a JSON object"
    """
    if not isinstance(name, str) or not _WATERMARK_NAME_RE.match(name) or ".." in name:
        return (f"its name {name!r:.80} is not a watermark name (letters, digits and "
                f"_ @ . = : / -, at most 200 characters, no '..')")
    if whole(value):
        return None
    if not isinstance(value, dict):
        return (f"its value is {type(value).__name__} {value!r:.60}; a watermark is a whole "
                f"number >= 0 or a JSON object")
    budget = [WATERMARK_ITEMS]

    def check(item: Any, depth: int) -> str | None:
        budget[0] -= 1
        if budget[0] < 0:
            return f"its value holds more than {WATERMARK_ITEMS} items"
        if item is None or isinstance(item, bool | str):
            return None
        if type(item) is int:
            return None if -MAX_INT - 1 <= item <= MAX_INT else f"it holds {item}, beyond int64"
        if type(item) is float:
            return None if math.isfinite(item) else f"it holds the number {item}"
        if isinstance(item, dict | list):
            if depth >= WATERMARK_DEPTH:
                return f"its value nests deeper than {WATERMARK_DEPTH} levels"
            if isinstance(item, dict):
                if not all(isinstance(k, str) for k in item):
                    return "its value has an object key that is not text"
                children: Iterable[Any] = item.values()
            else:
                children = item
            for child in children:
                why = check(child, depth + 1)
                if why is not None:
                    return why
            return None
        return f"it holds {type(item).__name__} {item!r:.40}, which is not JSON"

    return check(value, 1)


#: generation files whose bytes a log remembers having checked (then it starts over)
_CHECKED_KEEP = 16_384


def entry_problem(entry: Any, generation: int) -> str | None:
    """Why a parsed generation file is not one memframe wrote, or None (every field)."""
    if not isinstance(entry, dict):
        return f"it holds {type(entry).__name__}, not an object"
    lacking = sorted(_ENTRY_KEYS - set(entry))
    if lacking:
        return f"it lacks {', '.join(lacking)}"
    if not whole(entry["generation"], lo=1) or entry["generation"] != generation:
        return f"field generation is {entry['generation']!r:.40}; its name says {generation}"
    if "parent" in entry and entry["parent"] != generation - 1:
        return f"field parent is {entry['parent']!r:.40}; expected {generation - 1}"
    stamp = entry["timestamp"]
    if not isinstance(stamp, str) or not _STAMP_RE.match(stamp):
        return (f"field timestamp is {stamp!r:.40}; a commit stamp is UTC text such as "
                f"2026-07-23T12:00:00.000000Z")
    for flag in ("erases", "compaction"):
        if flag in entry and not isinstance(entry[flag], bool):
            return f"field {flag} is {entry[flag]!r:.40}, not true or false"
    if "operation" in entry and not isinstance(entry["operation"], str):
        return f"field operation is {entry['operation']!r:.40}, not text"
    if "verbs" in entry and not (isinstance(entry["verbs"], list)
                                 and all(isinstance(v, str) for v in entry["verbs"])):
        return "field verbs is not a list of text"
    if "seq" in entry and entry["seq"] is not None:
        why = _seq_range_problem(entry["seq"], nullable=False)
        if why is not None:
            return f"field seq {why}"
    if not isinstance(entry["add"], list) or not isinstance(entry["remove"], list):
        return "fields add and remove must be lists"
    for i, add in enumerate(entry["add"]):
        if not isinstance(add, dict) or set(add) != {"table", "path", "rows", "seq"}:
            return f"add[{i}] is not an object of table, path, rows and seq"
        if not whole(add["rows"]):
            return f"add[{i}].rows is {add['rows']!r:.40}; a row count is a whole number >= 0"
        why = _seq_range_problem(add["seq"], nullable=True, lo=0)
        if why is not None:
            return f"add[{i}].seq {why}"
    counters = entry["counters"]
    if not isinstance(counters, dict):
        return "field counters is not an object"
    for name, value in counters.items():
        if name == "chain":
            if not isinstance(value, str):
                return f"counters.chain is {value!r:.40}, not text"
        elif name not in COUNTER_NAMES:
            return f"counters holds an unknown counter {name!r:.40}"
        elif not whole(value):
            return f"counters.{name} is {value!r:.40}; a counter is a whole number >= 0"
    if not isinstance(entry["watermarks"], dict):
        return "field watermarks is not an object"
    for name, value in entry["watermarks"].items():
        why = watermark_problem(name, value)
        if why is not None:
            return f"watermark {name!r:.80}: {why}"
    return None


def _seq_range_problem(value: Any, *, nullable: bool, lo: int = 1) -> str | None:
    if nullable and value in (None, [None, None]):
        return None
    if (not isinstance(value, list) or len(value) != 2
            or not all(whole(v, lo=lo) for v in value) or value[0] > value[1]):
        return (f"is {value!r:.60}; a seq range is [first, last], whole numbers with "
                f"{lo} <= first <= last")
    return None


def parse_json(data: bytes | str) -> Any:
    """JSON text, with nesting that would exhaust the interpreter's stack as a ValueError.

    NaN, Infinity and numbers beyond a float parse (as floats), so that the checks of
    each field (`whole`, `watermark_problem`) can name the field that holds one.
    """
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("it nests deeper than a file memframe writes") from None


_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_NOT_WRITABLE = {errno.EROFS, errno.EACCES, errno.EPERM}


def storage_error(exc: OSError, root: Path, doing: str) -> StorageError | None:
    """The teaching error for a write the file system refused, or None for another
    ``OSError`` (which keeps its own meaning: a vanished file, a damaged store...)."""
    where = exc.filename if exc.filename is not None else root
    if exc.errno in _FULL:
        return StorageFullError(
            f"{doing}: the disk holding {root} is full ({exc.strerror}); nothing was written "
            f"and the partial files were removed. Free space on that disk (a vacuum of old "
            f"generations frees some: `memframe vacuum {root} --dry-run` shows how much), "
            f"then run it again", errno=exc.errno, path=str(where))
    if exc.errno in _NOT_WRITABLE:
        return StorageNotWritableError(
            f"{doing}: {where} cannot be written ({exc.strerror}): the store is on a "
            f"read-only file system or this user may not write there; nothing was written. "
            f"Reading it works; to write, mount it read-write or copy the store somewhere "
            f"writable", errno=exc.errno, path=str(where))
    return None


@contextlib.contextmanager
def storage_errors(root: Path, doing: str) -> Iterator[None]:
    """Turn a full disk or a read-only file system into a `StorageError` saying so."""
    try:
        yield
    except OSError as exc:
        translated = storage_error(exc, root, doing)
        if translated is None:
            raise
        raise translated from None


def check_part_path(table: str, path: str) -> None:
    """Refuse a log entry whose partition path is not one memframe writes for ``table``.

    A path that is absolute, climbs out with ``..`` or names another table's directory
    would make a reader follow it out of the store (another store's rows would appear).
    """
    check_part_paths(table, (path,))


def check_part_paths(table: str, paths: Iterable[str]) -> None:
    """`check_part_path` for many paths of one table (its name checked once)."""
    if not isinstance(table, str) or not TABLE_NAME_RE.match(table):
        raise CorruptStoreError(f"the log names a partition of table {table!r}, which is not "
                                f"a table name memframe writes")
    head, whole_name = table + "/", PART_NAME_RE.fullmatch
    for path in paths:
        if (not isinstance(path, str) or not path.startswith(head)
                or not whole_name(path, len(head))):
            raise CorruptStoreError(
                f"the log names partition {path!r} for table {table!r}: partitions live at "
                f"<table>/part-<generation>-<n>-<token>.parquet inside the store; a path that "
                f"is absolute, climbs out with '..' or crosses into another directory is "
                f"refused"
            )


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
            check_part_path(add["table"], add["path"])
            added.setdefault(add["table"], []).append(Part.from_json(add))
        for path in removed:
            if not isinstance(path, str) or "/" not in path:
                raise CorruptStoreError(f"the log removes {path!r}, which is no partition path")
            check_part_path(path.rsplit("/", 1)[0], path)
        # the tables this generation removes parts from (most remove none: an append)
        pruned = {path.rsplit("/", 1)[0] for path in removed}
        for name in set(added) | pruned:
            old = tables.get(name, ())
            new = sorted(added.get(name, ()), key=_sort_key)
            if name not in pruned and (not old or _sort_key(old[-1]) <= _sort_key(new[0])):
                # appended above every part: one copy, no per-part test (under a stream of
                # small commits a table holds thousands of parts, replayed per generation)
                tables[name] = old + tuple(new)
                continue
            parts = [p for p in old if p.path not in removed]
            if new and parts and _sort_key(new[0]) < _sort_key(parts[-1]):
                parts = sorted(parts + new, key=_sort_key)
            else:  # what is left stays in order below what is added
                parts.extend(new)
            if parts:
                tables[name] = tuple(parts)
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
        # (newest generation read, its file's identity, what the files up to it said)
        self._lifetimes: tuple[int, str | None, Lifetimes] | None = None
        # generation -> a hash of the bytes `read_entry` found whole: the same bytes are
        # not checked field by field again (a vacuum reads each new one twice: its
        # snapshot and the lifetimes; the check is three quarters of a read)
        self._checked: dict[int, bytes] = {}

    # -- creation / identification ------------------------------------------------------
    @staticmethod
    def create(root: Path, exist_ok: bool = False) -> Log:
        root = Path(root)
        if exist_ok and (root / MARKER).exists():
            return Log.open(root)
        if os.path.islink(root) and not root.exists():
            raise StoreExistsError(
                f"{root} is a symbolic link that leads nowhere (its target is missing, or the "
                f"links loop); remove the link or point it at an empty directory, or pick "
                f"another path for the store"
            )
        try:
            if root.exists() and (not root.is_dir() or any(root.iterdir())):
                what = "a store" if (root / MARKER).exists() else "files"
                raise StoreExistsError(
                    f"{root} already holds {what}; open it with Store.open(path), or pick an "
                    f"empty or new directory for Store.create"
                )
        except OSError as exc:  # a loop further up, a directory that cannot be listed
            raise StoreExistsError(f"{root} cannot be used for a new store: {exc.strerror}; "
                                   f"pick another path") from None
        made = [p for p in (*reversed(root.parents), root) if not p.exists()]
        try:
            with storage_errors(root, f"creating a store at {root}"):
                (root / LOG_DIR).mkdir(parents=True, exist_ok=True)
                marker = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
                _write_atomic(root / MARKER, json.dumps(marker).encode())
        except BaseException:
            # a failed create leaves nothing: the next create in that place must succeed
            (root / MARKER).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                (root / LOG_DIR).rmdir()
            for directory in reversed(made):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise
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
            data = parse_json(marker.read_bytes())
        except (OSError, ValueError) as exc:
            raise NotAStoreError(f"{marker} is not a readable format marker: {exc}") from None
        if not isinstance(data, dict):
            raise NotAStoreError(f"{marker} is not a format marker (it holds "
                                 f"{type(data).__name__}, not an object)")
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

    def ensure(self, parts: Iterable[Part]) -> None:
        """Make ``parts`` present under the root before they are read: nothing to do for
        a store on disk (a remote store's mirror fetches them)."""

    def part_size(self, path: str) -> int | None:
        """A partition file's size (None when it is missing)."""
        try:  # a string, not a Path: a digest's seal stats every canonical part
            return os.stat(os.path.join(self.root, path)).st_size
        except OSError:
            return None

    def same_file(self, path: str, recorded: dict[str, Any]) -> bool:
        """Whether partition ``path`` is the very file a fingerprint recorded."""
        return fingerprint.same_file(self.root / path, recorded)

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
        """Generation file ``generation``, checked field by field (`CorruptStoreError`
        naming the file and the field when it is not one memframe wrote)."""
        path = self.log_dir / gen_name(generation)
        try:
            data = path.read_bytes()
            entry = parse_json(data)
        except FileNotFoundError:
            raise GenerationNotFoundError(
                f"generation {generation} is not in {self.root}'s log"
            ) from None
        except ValueError as exc:
            raise CorruptStoreError(f"{path} is not valid JSON: {exc}; the store is damaged: "
                                    f"restore the log from a copy") from None
        seen = hashlib.blake2b(data, digest_size=16).digest()
        if self._checked.get(generation) == seen:
            return entry
        why = entry_problem(entry, generation)
        if why is not None:
            raise CorruptStoreError(
                f"{path} is not a generation file memframe wrote: {why}; the store is "
                f"damaged: restore the log from a copy"
            )
        if len(self._checked) >= _CHECKED_KEEP:
            self._checked.clear()
        self._checked[generation] = seen
        return entry

    def snapshot(self, generation: int | None = None, *, base: Snapshot | None = None,
                 use_checkpoints: bool = True) -> Snapshot:
        """The snapshot at ``generation`` (default: newest), replaying from a checkpoint.

        ``base`` (an older snapshot of this store, e.g. a handle's cache) is used instead
        of a checkpoint when it is closer.
        """
        if (base is not None and generation is not None
                and 0 <= generation - base.generation <= CHECKPOINT_EVERY):
            snap = base  # a short tail: replay it without listing the log
            for g in range(base.generation + 1, generation + 1):
                snap = self.apply_entry(snap, g)
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
        if use_checkpoints:
            for c in sorted((c for c in ckpts if c <= target), reverse=True):
                if base is not None and c <= base.generation:
                    break  # the handle's own snapshot is as close (no checkpoint read)
                checked = self._read_checkpoint(c)
                if checked is not None:
                    start = checked
                    break
        if base is not None and start.generation <= base.generation <= target:
            start = base
        snap = start
        for g in range(start.generation + 1, target + 1):
            snap = self.apply_entry(snap, g)
        return snap

    def apply_entry(self, snap: Snapshot, generation: int) -> Snapshot:
        """``snap`` advanced by generation file ``generation`` (refused if malformed)."""
        entry = self.read_entry(generation)
        try:
            return snap.apply(entry)
        except CorruptStoreError as exc:
            raise CorruptStoreError(f"{self.log_dir / gen_name(generation)}: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptStoreError(
                f"{self.log_dir / gen_name(generation)} is not a generation file memframe "
                f"wrote ({type(exc).__name__}: {exc}); the store is damaged: restore the log "
                f"from a copy"
            ) from None

    def _read_checkpoint(self, generation: int) -> Snapshot | None:
        """A checkpoint, only if it agrees with the log; None sends the reader to replay.

        A checkpoint records the sha256 of the generation file it summarises and of its
        own body; one copied from another store, left stale or edited does not match and
        is ignored (the log wins).
        """
        path = self.log_dir / f"_checkpoint.{generation:020d}.json"
        try:
            data = parse_json(path.read_bytes())
            body = data["snapshot"]
            if data["body_sha256"] != _sha256(_canonical(body)):
                return None
            entry_bytes = (self.log_dir / gen_name(generation)).read_bytes()
            if data["entry_sha256"] != hashlib.sha256(entry_bytes).hexdigest():
                return None
            snap = Snapshot.from_checkpoint(body)
            entry = parse_json(entry_bytes)
            if (snap.generation != generation or snap.timestamp != entry.get("timestamp")
                    or dict(snap.counters) != dict(entry.get("counters", {}))
                    or dict(snap.watermarks) != dict(entry.get("watermarks", {}))):
                return None
            for table, parts in snap.tables.items():
                check_part_paths(table, (part.path for part in parts))
            return snap
        except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError,
                CorruptStoreError):
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

    def generation_for_seq(self, seq: int) -> int:
        """The generation that committed the canonical row ``seq`` (0 when none did: a
        ``seq`` above the newest generation's counter, the last ``seq`` given)."""
        lo, hi = 1, self.latest_generation()
        found = 0
        while lo <= hi:  # the seq counter never decreases from one generation to the next
            mid = (lo + hi) // 2
            entry = self.read_entry(mid)
            counter = entry.get("counters", {}).get("seq")
            if counter is None:
                counter = self.snapshot(mid).counter("seq")
            if int(counter) >= seq:
                found, hi = mid, mid - 1
            else:
                lo = mid + 1
        return found

    # -- writing ------------------------------------------------------------------------
    def try_commit(self, entry: Mapping[str, Any]) -> bool:
        """Create generation ``entry['generation']`` exclusively; False if another won."""
        data = json.dumps(entry, separators=(",", ":"), sort_keys=False).encode()
        tmp = self.log_dir / f".tmp-{secrets.token_hex(8)}"
        try:
            _write_file(tmp, data, fsync=True)
            os.link(tmp, self.log_dir / gen_name(int(entry["generation"])))
        except FileExistsError:
            return False
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(self.log_dir)
        return True

    def rebase(self, entry: Mapping[str, Any], snap: Snapshot, tables: Iterable[str], *,
               new_capsules_only: bool = False, capsules_move: bool = False
               ) -> tuple[dict[str, Any], Snapshot] | None:
        """``entry`` (staged on ``snap``, lost the race) moved on top of the newest
        generation, with that generation's snapshot; None when a commit that beat it did
        more than append rows of ``tables`` above ``snap``'s last ``seq``.

        The conflict check of optimistic table formats: a commit that adds no row of its
        own (a compaction, the projections' fold below its watermark) reads only rows at
        or below ``snap``; commits that only appended above it (no part removed, nothing
        erased or compacted, no watermark moved) cannot have changed what it read, so its
        staged files stay right and only the entry's generation, parent, counters and
        stamp follow the newer generation.

        ``new_capsules_only``: the entry appends new capsules that read nothing stored but
        the id counters (`Commit.appends_fresh`), so the commits that beat it may have done
        anything but add a capsule (which would take its ids or hold its contents).
        ``capsules_move``: its ids may move past winners' new capsules too (the caller
        checks that none holds one of its contents: `Commit.moves_past_capsules`).
        """
        allowed, top = set(tables), int(snap.counter("seq"))
        latest = self.latest_generation(known=snap.generation)
        base = snap
        for g in range(snap.generation + 1, latest + 1):
            won = self.read_entry(g)
            after = base.apply(won)
            if new_capsules_only:
                conflict = (not capsules_move
                            and after.counter("capsules") != snap.counter("capsules"))
            else:
                conflict = bool(
                    won.get("remove") or won.get("erases") or won.get("compaction")
                    or won.get("watermarks", snap.watermarks) != snap.watermarks
                    or not all(add["table"] in allowed and (add.get("seq") or [None])[0]
                               is not None and add["seq"][0] > top
                               for add in won.get("add", ())))
            if conflict:
                return None
            base = after
        stamp = entry.get("timestamp")
        if base.timestamp is not None and (stamp is None or stamp < base.timestamp):
            stamp = base.timestamp  # commit stamps never go backwards (as_of bisects)
        return ({**entry, "generation": latest + 1, "parent": latest, "timestamp": stamp,
                 "counters": dict(base.counters)}, base)

    def write_checkpoint(self, snap: Snapshot) -> None:
        path = self.log_dir / f"_checkpoint.{snap.generation:020d}.json"
        body = snap.to_checkpoint()
        entry = (self.log_dir / gen_name(snap.generation)).read_bytes()
        data = {"entry_sha256": hashlib.sha256(entry).hexdigest(),
                "body_sha256": _sha256(_canonical(body)), "snapshot": body}
        _write_atomic(path, json.dumps(data, separators=(",", ":")).encode())

    def discard(self, *, remove_root: bool) -> bool:
        """Remove what `Log.create` made, for a store with no generation (caller holds the
        exclusive lock). Anything else found under the root stays, and so does the root."""
        if any(_GEN_RE.match(n) for n in os.listdir(self.log_dir)):
            return False
        for entry in os.scandir(self.root):
            if entry.is_dir(follow_symlinks=False) and entry.name != LOG_DIR:
                _remove_empty_tree(Path(entry.path))
        (self.root / MARKER).unlink(missing_ok=True)
        for entry in os.scandir(self.log_dir):
            if entry.name in (LOCK_FILE, PENDING_FILE, LOSERS_FILE, PUSH_FILE) or TEMP_NAME_RE.match(
                    entry.name):
                os.unlink(entry.path)
        with contextlib.suppress(OSError):
            self.log_dir.rmdir()
        if remove_root:
            with contextlib.suppress(OSError):
                self.root.rmdir()  # only if nothing else is left in it
        return True

    # -- the commit lock --------------------------------------------------------------------
    # Writers hold it shared from their first partition file until their generation links;
    # vacuum holds it exclusively while it deletes. So vacuum never removes the files of a
    # commit in flight, and a writer that died releases it with its process.
    def _lock_fd(self) -> int:
        path = self.log_dir / LOCK_FILE
        check_no_link(self.root, self.log_dir)
        try:
            # O_NOFOLLOW: a planted link never makes memframe create or open a file elsewhere
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise CorruptStoreError(link_message(path, self.root)) from None
            raise

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the commit lock shared (many writers at once) for the block."""
        fd = self._lock_fd()
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    @contextlib.contextmanager
    def exclusive(self, wait_seconds: float) -> Iterator[None]:
        """Hold the commit lock exclusively (no commit in flight), waiting up to a bound."""
        fd = self._lock_fd()
        try:
            # the commits in flight are small: take it as they end
            if not _flock_within(fd, fcntl.LOCK_EX, wait_seconds):
                raise ConcurrentCommitError(
                    f"a writer kept committing to {self.root} for {wait_seconds:g} s; "
                    f"nothing was removed: run vacuum again when writers are idle")
            yield
        finally:
            os.close(fd)

    # -- the fairness ticket (SQLite's PENDING lock, for optimistic commits) ---------------
    # A writer that keeps losing the race for the next generation takes the ticket; every
    # other commit waits behind it before starting an attempt, for at most
    # TICKET_WAIT_SECONDS, so the holder's next attempt lands. A holder that dies releases
    # it with its process (flock), and a store with no ticket file pays one failed open.
    def take_ticket(self, wait_seconds: float = 0.0) -> int | None:
        """The ticket's descriptor (held until `release_ticket`), or None when another
        writer holds it past ``wait_seconds`` or the store cannot be written."""
        return self._hold(PENDING_FILE, fcntl.LOCK_EX, wait_seconds)

    def ticket_taken(self) -> bool:
        """Whether another writer holds the ticket now (no wait)."""
        try:
            fd = os.open(self.log_dir / PENDING_FILE, _PROBE_FLAGS)
        except OSError:
            return False
        try:
            return not _flock_within(fd, fcntl.LOCK_SH, 0.0)
        finally:
            os.close(fd)

    def drain(self, wait_seconds: float) -> None:
        """Wait (at most ``wait_seconds``) until no commit holds the commit lock: the ones
        that passed the ticket before it was taken land first, so the holder's next
        attempt does not lose to them."""
        try:
            fd = self._lock_fd()
        except (OSError, CorruptStoreError):
            return
        try:
            _flock_within(fd, fcntl.LOCK_EX, wait_seconds)
        finally:
            os.close(fd)  # releases it at once

    @staticmethod
    def release_ticket(fd: int | None) -> None:
        if fd is not None:
            os.close(fd)  # closing releases the flock

    # -- losers first ------------------------------------------------------------------------
    # The writer that just linked starts its next commit at once, while a writer that lost
    # to it learns so only when it tries to link, after staging: the winner is a whole
    # attempt ahead, and wins again. Under one writer committing back to back, another
    # handle's single-row commit lost eight races in a row before the ticket let it land.
    # So a loser is marked until its commit ends, and a new commit waits for the marked
    # ones (bounded) before its first attempt: their retries race each other, not it.
    def mark_loser(self) -> int | None:
        """Mark this writer as one whose commit lost a race (held until `release_ticket`
        of the descriptor returned); None when the store cannot be written."""
        # shared marks never exclude each other; a waiter's probe holds it briefly
        return self._hold(LOSERS_FILE, fcntl.LOCK_SH, LOSER_WAIT_SECONDS)

    def wait_for_losers(self, wait_seconds: float | None = None) -> None:
        """Wait (at most ``wait_seconds``, default `LOSER_WAIT_SECONDS`) while a writer
        whose commit lost a race is still retrying it."""
        self._wait_while_held(LOSERS_FILE, fcntl.LOCK_EX,
                              LOSER_WAIT_SECONDS if wait_seconds is None else wait_seconds)

    def wait_for_ticket(self, wait_seconds: float | None = None) -> None:
        """Wait (at most ``wait_seconds``, default `TICKET_WAIT_SECONDS`) while another
        writer holds the ticket."""
        self._wait_while_held(PENDING_FILE, fcntl.LOCK_SH,
                              TICKET_WAIT_SECONDS if wait_seconds is None else wait_seconds)

    # -- pushes and vacuums ----------------------------------------------------------------
    @contextlib.contextmanager
    def pushing(self, wait_seconds: float = 30.0) -> Iterator[None]:
        """Hold off the vacuums that remove files without the commit lock (see `PUSH_FILE`)
        for the block: a push copies files of generations a later one replaced."""
        fd = self._hold(PUSH_FILE, fcntl.LOCK_SH, wait_seconds)
        try:
            yield
        finally:
            self.release_ticket(fd)

    def no_push(self) -> int | None:
        """A descriptor holding `PUSH_FILE` exclusively when no push runs now (no wait),
        released by `release_ticket`; None when one does or the store cannot be written."""
        return self._hold(PUSH_FILE, fcntl.LOCK_EX, 0.0)

    def _hold(self, name: str, operation: int, wait_seconds: float) -> int | None:
        """A descriptor of ``_log/<name>`` holding ``operation`` (flock), taken within
        ``wait_seconds``; None when it was not, or the store cannot be written (a read-only
        store, a planted link): commits then go on without it."""
        try:
            check_no_link(self.root, self.log_dir)
            fd = os.open(self.log_dir / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except (OSError, CorruptStoreError):
            return None
        if _flock_within(fd, operation, wait_seconds):
            return fd
        os.close(fd)
        return None

    def _wait_while_held(self, name: str, operation: int, wait_seconds: float) -> None:
        """Wait (at most ``wait_seconds``) until ``operation`` on ``_log/<name>`` could
        be taken, i.e. no other writer holds what excludes it; the probe's hold ends with
        it. No file (never taken here, or no file of ours): no wait."""
        try:
            fd = os.open(self.log_dir / name, _PROBE_FLAGS)
        except OSError:
            return
        try:
            _flock_within(fd, operation, wait_seconds)
        finally:
            os.close(fd)

    def lifetimes(self, newest: int) -> Lifetimes:
        """Every partition the log ever named, with the generations that added and removed
        it, read from every generation file (no checkpoint: vacuum deletes by it).

        The generation files this handle read before are not read again (they never
        change once linked: only the new ones are), so a vacuum under a stream of commits
        costs the commits since the last one, not the log's length. The cache is dropped
        when its newest file is no longer the one read (a log restored from a copy)."""
        cached = self._lifetimes
        if cached is not None and (cached[0] > newest or cached[1] != self._identity(cached[0])):
            cached = None
        if cached is None:
            paths: dict[str, tuple[int, int | None]] = {}
            stamps: list[str] = []
            last_erasure, start = 0, 1
        else:
            _g, _id, known = cached
            paths, stamps = dict(known.paths), list(known.stamps)
            last_erasure, start = known.last_erasure, cached[0] + 1
        for g in range(start, newest + 1):
            entry = self.read_entry(g)
            stamps.append(entry["timestamp"])
            for add in entry["add"]:
                check_part_path(add["table"], add["path"])
                paths[add["path"]] = (g, None)
            for path in entry["remove"]:
                if path in paths:
                    paths[path] = (paths[path][0], g)
            if _erases(entry):
                last_erasure = g
        found = Lifetimes(paths, stamps, last_erasure)
        if newest:
            self._lifetimes = (newest, self._identity(newest), found)
        return Lifetimes(dict(paths), list(stamps), last_erasure)

    def _identity(self, generation: int) -> str | None:
        # its bytes (an inode is reused and a stamp is coarse: a restored file can match both)
        try:
            return _sha256((self.log_dir / gen_name(generation)).read_bytes())
        except OSError:
            return None


def _erases(entry: Mapping[str, Any]) -> bool:
    """Whether a generation erased content. Files written before the ``erases`` field:
    any capsule partition replaced outside a compaction counts as an erasure."""
    if "erases" in entry:
        return bool(entry["erases"])
    return entry.get("operation") != "compact" and any(
        isinstance(p, str) and p.startswith("capsules/") for p in entry["remove"])


@dataclasses.dataclass(frozen=True)
class Lifetimes:
    """The log's history of partitions: ``paths`` maps each to (added, removed or None)."""

    paths: Mapping[str, tuple[int, int | None]]
    stamps: list[str]  # commit stamp of generation g at index g - 1
    last_erasure: int  # the newest generation that erased content (0: none)

    def current_at(self, stamp: str) -> int:
        """The newest generation committed at or before ``stamp`` (0: none)."""
        return bisect.bisect_right(self.stamps, stamp)

    def readable_from(self, present: set[str]) -> int | None:
        """The first generation from which every later one is readable when only
        ``present`` files exist (None: not even the newest is)."""
        first = 1
        for path, (_added, removed) in self.paths.items():
            if path not in present:
                if removed is None:
                    return None
                first = max(first, removed)
        return first


def link_message(path: Path, root: Path) -> str:
    """The teaching text for a symbolic link found where memframe writes."""
    return (f"{path} is a symbolic link; memframe never writes through a link (it could "
            f"lead into another store or anywhere writable), so nothing was written. Remove "
            f"the link (`rm {shlex.quote(str(path))}`): memframe makes the file or directory "
            f"again itself (for a table's _delta_log, run `memframe delta sync --rebuild "
            f"{shlex.quote(str(root))}` afterwards)")


def check_no_link(root: Path, path: Path) -> None:
    """Refuse to write at ``path`` (inside ``root``) when it, or a directory between the
    store root and it, is a symbolic link (`CorruptStoreError` naming it and the fix).
    The store root itself may be a link: the user chose it."""
    try:
        rel = Path(path).relative_to(root)
    except ValueError:
        raise CorruptStoreError(f"{path} is outside the store {root}; nothing was written"
                                ) from None
    here = Path(root)
    for name in rel.parts:
        here = here / name
        try:
            st = os.lstat(here)
        except FileNotFoundError:
            return  # made by memframe below this point (mkdir does not follow links)
        if stat.S_ISLNK(st.st_mode):
            raise CorruptStoreError(link_message(here, root))


def _remove_empty_tree(path: Path) -> None:
    """Remove directories that hold nothing but empty directories (never a file)."""
    for dirpath, _dirs, _files in os.walk(path, topdown=False, followlinks=False):
        with contextlib.suppress(OSError):
            os.rmdir(dirpath)


def _canonical(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a directory's new entries durable (a file is reachable only once its name is)."""
    _fsync_dir(path)


def _write_file(path: Path, data: bytes, *, fsync: bool) -> None:
    # "x" is O_CREAT | O_EXCL: a link planted at the name fails the open, never followed
    with open(path, "xb") as fh:
        fh.write(data)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".tmp-{secrets.token_hex(8)}")
    try:
        _write_file(tmp, data, fsync=True)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no temporary file behind
        raise


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
