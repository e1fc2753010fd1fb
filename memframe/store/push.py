"""Publishing a store to object storage: generations replicated in order.

A push copies what the remote lacks, in the order that keeps every reader of the remote
copy on whole generations:

1. the partition files first (unique names, so a file already there is the same file);
2. then each missing generation file, in order, created exclusively (the object store's
   conditional put, ``If-None-Match: *``): two pushers never both land one generation, and a
   pusher that finds its own generation already there (a push that died after landing it)
   goes on;
3. on the first push, the format marker last, so the remote is not a store until its first
   generations are whole;
4. finally the partition files the local store no longer has (removed by a local vacuum:
   compacted, rebuilt or erased rows) are deleted remotely, so erasure travels.

A push that dies at any point leaves a remote copy that readers see at an older, whole
generation, and the next push resumes from what the remote holds. Until that push, the
remote keeps what the last finished push left there, erased rows included: run ``push``
after the ``vacuum`` that removes them locally.

One exception to "readers see whole generations": when the remote is so far behind that a
local vacuum already removed files its missing generations named, those generations cannot
be made whole again (their files are gone everywhere); they land in order on the way to
the newest one, which is whole. A reader that pins one of them meanwhile is told it is not
readable and reads the newest once the push ends.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from memframe.errors import ConcurrentCommitError, InvalidInputError, StoreExistsError
from memframe.store import log as log_module
from memframe.store import tables
from memframe.store.log import Log, gen_name
from memframe.store.mirror import remote_keys
from memframe.store.objects import Objects, local_path

__all__ = ["push_log"]

_PART_KEY_RE = re.compile(r"^[a-z][a-z0-9_]*(?:/[A-Za-z0-9_]+)*/part-\d{20}-\d{4}-[0-9a-f]{12}\.parquet$")


def _remote_log(remote: Objects) -> tuple[int, set[str]]:
    """The remote's newest generation and the names under its ``_log/``."""
    names = {key.rsplit("/", 1)[-1] for key, _ in remote.listing(f"{log_module.LOG_DIR}/")}
    gens = [int(m.group(1)) for n in names if (m := log_module._GEN_RE.match(n))]
    return max(gens, default=0), names


def _check_same_history(log: Log, remote: Objects, remote_newest: int, local_newest: int) -> None:
    url = remote.url
    if remote_newest > local_newest:
        raise StoreExistsError(
            f"{url} is at generation {remote_newest}, ahead of {log.root} (generation "
            f"{local_newest}): it was published from another copy of the store, or from "
            f"another store; push to a new URL, or push from the copy that is ahead")
    if remote_newest:
        name = gen_name(remote_newest)
        if remote.get(f"{log_module.LOG_DIR}/{name}") != (log.log_dir / name).read_bytes():
            raise StoreExistsError(
                f"{url} holds another store's history (its generation {remote_newest} differs "
                f"from {log.root}'s): push to a new URL, or remove the remote copy first")


def push_log(log: Log, url: str, storage_options: Any = None, *,
             progress: bool = False) -> dict[str, Any]:
    """Replicate the store of ``log`` to ``url`` (see the module's docstring); what was
    done, as `Store.push` answers it."""
    remote = Objects(url, storage_options)
    target = local_path(remote.url)
    if target is not None and target.resolve() == log.root.resolve():
        raise InvalidInputError(f"{url} is the store itself; push to another place")
    marker = (log.root / log_module.MARKER).read_bytes()
    remote_marker = remote.get(log_module.MARKER)
    if remote_marker is not None and remote_marker != marker:
        raise StoreExistsError(f"{remote.url} holds something that is not this store's format "
                               f"({log_module.MARKER} differs); push to a new URL")
    # the shared lock of writers, and the push's own: a local vacuum waits until the
    # files are copied
    with log.pushing(), log.writing():
        newest = log.latest_generation()
        remote_newest, log_names = _remote_log(remote)
        _check_same_history(log, remote, remote_newest, newest)
        snap = log.snapshot(newest)
        tables.require_present(log.root, (p for parts in snap.tables.values() for p in parts))
        present = {key: size for key, size in remote.listing("") if _PART_KEY_RE.match(key)}
        wanted = set(remote_keys(snap))
        for g in range(remote_newest + 1, newest + 1):  # files of the generations between
            wanted.update(a["path"] for a in log.read_entry(g).get("add", ())
                          if (log.root / a["path"]).exists())
        todo = sorted(p for p in wanted if p not in present)
        sizes = [(log.root / p).stat().st_size for p in todo]
        _upload(remote, [(log.root / p, p) for p in todo], sizes, progress)
        for g in range(remote_newest + 1, newest + 1):
            name = gen_name(g)
            data = (log.log_dir / name).read_bytes()
            if not remote.put(f"{log_module.LOG_DIR}/{name}", data, create=True) and \
                    remote.get(f"{log_module.LOG_DIR}/{name}") != data:
                raise ConcurrentCommitError(
                    f"another push landed a different generation {g} at {remote.url} first; "
                    f"generations 1..{g - 1} of {log.root} are there, the rest was not pushed")
        checkpoints = sorted(p.name for p in log.log_dir.iterdir()
                             if log_module._CKPT_RE.match(p.name) and p.name not in log_names
                             and int(p.name.split(".")[1]) <= newest)
        for name in checkpoints:
            remote.put(f"{log_module.LOG_DIR}/{name}", (log.log_dir / name).read_bytes(),
                       create=True)
        if remote_marker is None:
            remote.put(log_module.MARKER, marker, create=True)
        doomed = sorted(k for k in present if k not in wanted and not (log.root / k).exists())
        remote.delete_many(doomed)
    return {
        "url": remote.url,
        "generation": newest,
        "generations_pushed": [remote_newest + 1, newest] if newest > remote_newest else None,
        "files": len(todo),
        "bytes": sum(sizes),
        "deleted": len(doomed),
        **remote.counts(),
    }


def _upload(remote: Objects, pairs: list[tuple[Path, str]], sizes: list[int],
            progress: bool) -> None:
    if not progress or not pairs:
        remote.upload_many(pairs)
        return
    from tqdm import tqdm

    step = 64
    with tqdm(total=sum(sizes), unit="B", unit_scale=True, desc="push",
              leave=False) as bar:
        for start in range(0, len(pairs), step):
            remote.upload_many(pairs[start:start + step])
            bar.update(sum(sizes[start:start + step]))
