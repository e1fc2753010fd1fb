"""A store on object storage, read through a local mirror filled with what is read.

The remote copy has the local layout (``memframe.json``, ``_log/``, the tables' partition
files), written by `memframe.store.push`. A reader keeps a mirror of it in a cache
directory: the generation files it replays, and the partition files its reads need,
fetched in parallel just before they are read (`MirrorLog.ensure`, which `StoreView`
calls at each read) and kept: partition and generation files are immutable, so a file
fetched once serves every later generation that names it. The rest of memframe reads the
mirror as a local store, and never sees half a generation (the files a generation names
were uploaded before it was created).

The newest generation is found as locally: one listing when the store is opened, then a
probe of the next generation file per call (one request when nothing is new).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from memframe.errors import GenerationNotFoundError, NotAStoreError, ReadOnlyStoreError
from memframe.store import log as log_module
from memframe.store.log import Log, Part, Snapshot, gen_name
from memframe.store.objects import Objects

__all__ = ["MirrorLog", "open_mirror", "cache_root", "remote_keys"]


def cache_root() -> Path:
    """Where mirrors live: ``$MEMFRAME_CACHE_DIR``, else ``~/.cache/memframe``."""
    configured = os.environ.get("MEMFRAME_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memframe"


def _mirror_dir(url: str, cache_dir: str | os.PathLike[str] | None) -> Path:
    base = Path(cache_dir) if cache_dir is not None else cache_root() / "remote"
    return base / hashlib.sha256(url.encode()).hexdigest()[:24]


def remote_keys(snap: Snapshot) -> list[str]:
    """Every partition file ``snap`` names (its keys under the store's URL)."""
    return [part.path for parts in snap.tables.values() for part in parts]


class MirrorLog(Log):
    """The generation log of a remote store, replayed from a local mirror that fetches
    what it lacks. Writing is refused (`ReadOnlyStoreError`): stores are published with
    ``push``."""

    def __init__(self, root: Path, objects: Objects, newest: int, checkpoints: list[int]):
        super().__init__(root)
        self.objects = objects
        self._newest = newest
        self._checkpoints = sorted(checkpoints)
        self._local: set[str] = set()  # partition files known to be in the mirror
        self._gone: set[str] = set()  # ... and known to be absent remotely
        self._guard = threading.Lock()
        self._sizes: tuple[int, dict[str, int]] | None = None  # (newest, remote sizes)
        self._confirmed: dict[tuple[Any, ...], bool] = {}

    @property
    def url(self) -> str:
        return self.objects.url

    def _fetch(self, name: str) -> bool:
        """``_log/<name>`` in the mirror (fetched if absent); False when the remote lacks it."""
        path = self.log_dir / name
        return path.exists() or self.objects.download(f"{log_module.LOG_DIR}/{name}", path)

    def _prefetch(self, first: int, last: int) -> None:
        """Generation files ``first..last`` fetched in parallel (a replay then reads them
        one by one from the mirror)."""
        names = [gen_name(g) for g in range(max(first, 1), last + 1)]
        todo = [(f"{log_module.LOG_DIR}/{n}", self.log_dir / n) for n in names
                if not (self.log_dir / n).exists()]
        self.objects.download_many(todo)

    # -- the reading side of Log, over the mirror ----------------------------------------
    def _listing(self) -> tuple[list[int], list[int]]:
        return list(range(1, self._newest + 1)), list(self._checkpoints)

    def latest_generation(self, known: int | None = None) -> int:
        g = max(self._newest, known or 0)
        while self._fetch(gen_name(g + 1)):
            g += 1
        with self._guard:
            if g > self._newest:
                self._newest = g
                self._gone.clear()  # a file missing before may have been pushed since
        return g

    def read_entry(self, generation: int) -> dict[str, Any]:
        if generation > 0:
            self._fetch(gen_name(generation))
        return super().read_entry(generation)

    def _read_checkpoint(self, generation: int) -> Snapshot | None:
        if not (self._fetch(f"_checkpoint.{generation:020d}.json")
                and self._fetch(gen_name(generation))):
            return None
        return super()._read_checkpoint(generation)

    def snapshot(self, generation: int | None = None, *, base: Snapshot | None = None,
                 use_checkpoints: bool = True) -> Snapshot:
        target = self._newest if generation is None else generation
        start = base.generation if base is not None and base.generation <= target else 0
        if use_checkpoints:
            start = max([start, *(c for c in self._checkpoints if c <= target)])
        if 0 <= target <= self._newest:
            self._prefetch(start, target)
        return super().snapshot(generation, base=base, use_checkpoints=use_checkpoints)

    def ensure(self, parts: Iterable[Part]) -> None:
        """Fetch the partition files of ``parts`` that the mirror lacks (in parallel),
        before they are read. A file the remote lacks too stays absent, so reading it
        gives the store's own error for a missing file (vacuumed history, or a push still
        under way)."""
        with self._guard:
            todo = list(dict.fromkeys(p.path for p in parts if p.path not in self._local
                                      and p.path not in self._gone))
        present = {p for p in todo if (self.root / p).exists()}
        todo = [p for p in todo if p not in present]
        missing = set(self.objects.download_many([(p, self.root / p) for p in todo]))
        with self._guard:
            self._gone.update(missing)
            self._local.update(present, (p for p in todo if p not in missing))

    def prune(self, snap: Snapshot) -> int:
        """Remove mirrored partition files ``snap`` does not name (older generations' files,
        erased rows among them: the mirror keeps no more than the remote's newest
        generation needs); how many were removed."""
        keep = set(remote_keys(snap))
        removed = 0
        for dirpath, _dirs, files in os.walk(self.root):
            for name in files:
                if not log_module.PART_NAME_RE.fullmatch(name):
                    continue
                path = Path(dirpath) / name
                if path.relative_to(self.root).as_posix() not in keep:
                    path.unlink(missing_ok=True)
                    removed += 1
        with self._guard:
            self._local &= keep
        return removed

    def part_size(self, path: str) -> int | None:
        """The size of a partition file as the remote lists it (one listing of the store
        per newest generation seen), None when the remote does not hold it."""
        with self._guard:
            if self._sizes is None or self._sizes[0] != self._newest:
                listed = dict(self.objects.listing(""))
                self._sizes = (self._newest, listed)
            return self._sizes[1].get(path)

    def same_file(self, path: str, recorded: dict[str, Any]) -> bool:
        """Is the mirrored file the very file ``recorded`` fingerprinted? Its bytes are
        hashed once per process (a mirrored file never changes: it is fetched whole and
        renamed into place), as a copy of a store is confirmed by its bytes."""
        key = (path, recorded.get("sha256"), recorded.get("size"))
        if key not in self._confirmed:
            self.ensure([Part(path=path, rows=0)])
            self._confirmed[key] = super().same_file(path, recorded)
        return self._confirmed[key]

    # -- writing is refused ---------------------------------------------------------------
    def try_commit(self, entry: Any) -> bool:
        raise ReadOnlyStoreError(f"{self.url} is read through a mirror; publish to it with "
                                 f"push")

    def write_checkpoint(self, snap: Snapshot) -> None:
        return None  # the mirror keeps what the remote has; a checkpoint is an optimisation


def open_mirror(url: str, storage_options: Any = None,
                cache_dir: str | os.PathLike[str] | None = None) -> MirrorLog:
    """The mirror of the store at ``url`` (made or brought up to date): one listing of its
    log, its format marker checked. A mirror left by another store once published at the
    same URL (its first generation differs) is discarded."""
    objects = Objects(url, storage_options)
    marker = objects.get(log_module.MARKER)
    if marker is None:
        raise NotAStoreError(
            f"{objects.url} is not a memframe store (it has no {log_module.MARKER}); publish "
            f"one there with `memframe push STORE {objects.url}` (store.push(url)), or check "
            f"the URL")
    gens: list[int] = []
    checkpoints: list[int] = []
    for key, _size in objects.listing(f"{log_module.LOG_DIR}/"):
        name = key.rsplit("/", 1)[-1]
        if (m := log_module._GEN_RE.match(name)) is not None:
            gens.append(int(m.group(1)))
        elif (m := log_module._CKPT_RE.match(name)) is not None:
            checkpoints.append(int(m.group(1)))
    root = _mirror_dir(objects.url, cache_dir)
    first = root / log_module.LOG_DIR / gen_name(1)
    if gens and first.exists() and objects.get(f"{log_module.LOG_DIR}/{gen_name(1)}") \
            != first.read_bytes():
        shutil.rmtree(root)
    (root / log_module.LOG_DIR).mkdir(parents=True, exist_ok=True)
    if not (root / log_module.MARKER).exists() or (root / log_module.MARKER).read_bytes() != marker:
        log_module._write_atomic(root / log_module.MARKER, marker)
    try:
        Log.open(root)  # the marker's format and version, checked as locally
    except NotAStoreError as exc:
        raise NotAStoreError(str(exc).replace(str(root), objects.url)) from None
    newest = max(gens, default=0)
    if gens and len(gens) != newest:
        missing = min(set(range(1, newest + 1)) - set(gens))
        raise GenerationNotFoundError(
            f"{objects.url} lists generations up to {newest} but not generation {missing}: "
            f"the remote copy is damaged; push the store to it again")
    return MirrorLog(root, objects, newest, checkpoints)
