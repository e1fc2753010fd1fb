"""Partition-file fingerprints: a file's sha256 and its identity (inode, times).

The journal's verified checkpoint records one per journal partition, so a later digest
can confirm that the files it trusts are the very files that were verified: the identity
answers at once when it is old enough to be trusted, else the bytes are hashed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memframe.schema import CANONICAL_TABLES

#: a file identity younger than this (ns) is not trusted when its change time is in whole
#: seconds: such a file system's times tick by the second (or two), and a rewrite within
#: the same tick keeps every field of the identity
RACY_NS = 2_000_000_000
#: ... and when its change time is finer: the kernel stamps files from a clock that ticks
#: every few milliseconds (one tick at 100 Hz is 10 ms), to the file system's precision,
#: which the time's trailing zeros bound
RACY_FINE_NS = 50_000_000


def racy_window(ctime_ns: int) -> int:
    """How long (ns) after its last change a file's identity is not trusted: a rewrite
    within one tick of the file system's clock would keep the same change time.

    A change time in whole seconds is a coarse file system's: `RACY_NS`. A finer one was
    stamped from the kernel's clock, which ticks every few milliseconds, to a precision its
    trailing zeros bound: `RACY_FINE_NS` plus that precision.

    Examples:
        >>> racy_window(1_733_400_000_000_000_000)  # whole seconds
        2000000000
        >>> racy_window(1_733_400_000_123_456_789)  # nanoseconds
        50000001
        >>> racy_window(1_733_400_000_120_000_000)  # ten milliseconds
        60000000
    """
    if ctime_ns % 1_000_000_000 == 0:
        return RACY_NS
    step = 1
    while ctime_ns % (step * 10) == 0:
        step *= 10
    return min(RACY_NS, RACY_FINE_NS + step)  # (a test that trusts at once sets RACY_NS = 0)


def _stat_identity(st: os.stat_result) -> dict[str, Any]:
    return {"size": int(st.st_size), "inode": int(st.st_ino),
            "mtime_ns": int(st.st_mtime_ns), "ctime_ns": int(st.st_ctime_ns)}


def _identity(st: os.stat_result, now_ns: int) -> dict[str, Any]:
    ident = _stat_identity(st)
    if st.st_ctime_ns > now_ns - racy_window(st.st_ctime_ns):
        ident.update(inode=None, mtime_ns=None, ctime_ns=None)  # too young: the size alone
    return ident


def read_fingerprinted(path: Path) -> tuple[bytes, dict[str, Any]]:
    """A file's bytes and its fingerprint (sha256 of those very bytes, identity)."""
    with open(path, "rb") as fh:
        before = os.fstat(fh.fileno())
        data = fh.read()
        after = os.fstat(fh.fileno())
    ident = _identity(before, time.time_ns())
    if (before.st_ctime_ns, before.st_size) != (after.st_ctime_ns, after.st_size):
        ident.update(inode=None, mtime_ns=None, ctime_ns=None)  # changed while read
    return data, {"sha256": hashlib.sha256(data).hexdigest(), **ident}


def file_fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The fingerprint of one file: sha256 of its bytes and its identity.

    The identity (inode, mtime, ctime) is None when the file changed within its
    `racy_window`.

    Examples:
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "f")
        >>> _ = open(p, "wb").write(b"abc")
        >>> fp = file_fingerprint(p)
        >>> fp["sha256"][:12], fp["size"]
        ('ba7816bf8f01', 3)
    """
    return read_fingerprinted(Path(path))[1]


def same_file(path: Path, row: dict[str, Any]) -> bool:
    """Is ``path`` the very file ``row`` recorded? Identity first, then its bytes."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if st.st_size != row["size"]:
        return False
    if row["ctime_ns"] is not None and (
        int(st.st_ino), int(st.st_mtime_ns), int(st.st_ctime_ns)
    ) == (row["inode"], row["mtime_ns"], row["ctime_ns"]):
        return True
    try:
        with open(path, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest() == row["sha256"]
    except OSError:
        return False


def seal(parts: Iterable[tuple[str, int, dict[str, Any]]]) -> str:
    """The sha256 of files' paths, row counts and identities, in path order (a
    checkpoint's seal: equal only if every path, count and identity is)."""
    items = sorted([path, rows, ident["size"], ident["inode"], ident["mtime_ns"],
                    ident["ctime_ns"]] for path, rows, ident in parts)
    return hashlib.sha256(json.dumps(items).encode()).hexdigest()


def current_identity(path: str | Path) -> dict[str, Any] | None:
    """A file's identity now (size, inode, mtime, ctime), trusted or not; None when it
    cannot be stat'ed."""
    try:
        return _stat_identity(os.stat(path))
    except OSError:
        return None


#: the watermark holding the seal of the canonical parts the digest's state folded
#: (`memframe.digest.state.digest_capsules.seal_holds`); a commit that rewrites canonical parts itself (an
#: erasure, a compaction: same rows, new files) seals them again (`canonical_seal`)
SEAL_MARK = "projections/digest/seal"


def canonical_seal(root: Path, tables: Any, top: int,
                   size: Callable[[str], int | None] | None = None) -> dict[str, Any] | None:
    """The seal of the canonical parts holding rows at or below ``top`` that ``tables``
    (table name -> parts, as a snapshot holds them) names (a part a compaction merged
    across ``top`` included: it holds rows the state folded): the sha256 of every part's
    path, row count and size now (one stat each, or ``size(path)``: a remote store's sizes
    as listed). Sizes, not inodes or change times, so that a copy of the store (a clone,
    an installed sample, a backup restored, a remote copy) keeps its seal, while an edit
    that changes a part's size breaks it. None when a part cannot be stat'ed."""
    if size is None:
        base = os.fspath(root) + os.sep  # (a warm digest stats every part, ~1k at 10M)

        def size(path: str) -> int | None:
            try:
                return os.stat(base + path).st_size
            except OSError:
                return None

    entries = []
    for name in CANONICAL_TABLES:
        for part in tables.get(name, ()):
            if (part.seq_lo or 0) <= top:
                found = size(part.path)
                if found is None:
                    return None
                entries.append([part.path, part.rows, found])
    digest = hashlib.sha256(json.dumps(sorted(entries)).encode()).hexdigest()
    return {"seq": top, "parts": len(entries), "sha256": digest}
