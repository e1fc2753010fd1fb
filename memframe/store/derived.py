"""Which code wrote a store's derived state, and hiding the state other code wrote.

Derived tables (``projections/...``) and their watermarks are a cache of what memframe's
code computes from the canonical tables. A cache is only as good as the code that filled
it: if a section function changes, values it computed before must never be served again.
So every commit that writes derived state records, in the watermark `WRITER`, the
identity of the code that wrote it (`writer`: a sha256 over the code of every module
that computes derived values, so an upgrade or any edit of the code changes it, an edit
of docstrings or comments does not; no number is bumped by hand). A reader whose code
has another identity sees no derived state at all (`visible`: the views of
`memframe.store.StoreView` show it), so it folds from the canonical rows;
the next job that writes derived state drops every stale table in its own commit
(`settle`) and builds afresh. Nothing is migrated.

Canonical tables and watermarks that are not derived (an import's cursor) are untouched.

**Text read from content.** Derived tables that keep text read from capsule content (a
headline, an ACTIVE() label) are named under `TEXT_PREFIX`, and no other derived table
keeps any. A commit that erases a capsule's content (``forget`` with ``redact`` or
``purge``) writes each of them that holds an erased capsule's text again in that same
commit, without the erased capsules' rows (`without_erased`: a table whose rows name their
capsule in the column `TEXT_KEY`), or drops it whole (a table whose rows hang together,
listing the capsules they name in `TEXT_NAMES`, or one with neither column), so once the
replaced files are vacuumed no file under the store holds the erased text, in values or
in Parquet statistics. A text table's reader must take a missing row as text it does not
hold (readers read the text of the rows they emit from the capsules), and its job writes
a dropped table again.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from memframe.store.log import Snapshot

__all__ = ["PREFIX", "TEXT_PREFIX", "TEXT_KEY", "TEXT_NAMES", "WRITER", "writer", "mark",
           "is_derived", "current", "files_present", "visible", "settle", "without_erased"]

#: every derived table and every derived watermark is named under this prefix
PREFIX = "projections/"
#: where derived tables were, or are, kept: state under an earlier root is dropped too
_ROOTS = (PREFIX, "derived/")
#: the derived tables that keep text read from capsule content (and only they) are named
#: under this prefix: an erasure rewrites them in its own commit (`without_erased`)
TEXT_PREFIX = "projections/text/"
#: the column in which a text table's row names the capsule (its number) whose text it
#: holds: an erasure drops those rows and keeps the others; a text table without this
#: column is dropped whole
TEXT_KEY = "num"
#: the column in which a text table's row lists every capsule its text names (their
#: numbers, in decimal, separated by spaces: a flat column, whose footer a short process
#: decodes without pyarrow), for a table whose rows hang together (values kept whole):
#: the table is dropped whole when a row names an erased capsule, kept when none does
TEXT_NAMES = "names"
#: the watermark naming the code that wrote the derived state of a generation
WRITER = "projections/writer"

_PACKAGE = Path(__file__).resolve().parents[1]
#: the modules whose code decides what derived state holds (relative to the package)
_SOURCES = ("store", "derived", "projections", "digest", "jobs", "state.py", "graph.py",
            "text.py", "ids.py", "schema.py", "taint.py", "errors.py", "_scalars.py",
            "frames.py")
#: entries the per-user cache of module code hashes keeps (several installs share it)
_CACHE_ENTRIES = 4_096


@functools.cache
def writer() -> str:
    """The identity of the running code as a writer of derived state (computed once): a
    sha256 over each module's code with its docstrings and comments left out
    (`code_hash`), so an edit of the documentation alone keeps every store's derived
    state, and any edit of the code drops it.

    Examples:
        >>> len(writer()), writer() == writer()
        (64, True)
    """
    files: list[Path] = []
    for name in _SOURCES:
        path = _PACKAGE / name
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    return _identity(files, _cache_file())


def code_hash(source: bytes) -> str:
    r"""The sha256 of a module's code: its syntax tree with every docstring (the first
    string of a module, class or function body) removed, dumped without positions (so
    comments, blank lines and layout do not count either).

    Examples:
        >>> a = b"def f(x):\n    'Add one.'\n    return x + 1  # one\n"
        >>> b = b"def f(x):\n\n    'Add one to x.'\n    return x + 1\n"
        >>> code_hash(a) == code_hash(b), code_hash(a) == code_hash(a.replace(b"1", b"2"))
        (True, False)
    """
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                node.body = node.body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def _identity(files: list[Path], cache: Path | None) -> str:
    """sha256 over each file's path and `code_hash`. Parsing every module takes about
    0.3 s, more than a warm digest, so the hashes are kept per user, keyed by the Python
    version and the sha256 of the file's bytes (a missing, unreadable or damaged cache is
    only slower: the answer is the same)."""
    version = "{}.{}".format(*sys.version_info[:2])
    known: dict[str, str] = {}
    if cache is not None:
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(cache.read_bytes())
            if isinstance(loaded, dict):
                known = {k: v for k, v in loaded.items() if isinstance(v, str)}
    digest, added = hashlib.sha256(), {}
    for path in files:
        source = path.read_bytes()
        key = f"{version}:{hashlib.sha256(source).hexdigest()}"
        code = known.get(key)
        if code is None:
            code = added[key] = code_hash(source)
        digest.update(f"{path.relative_to(_PACKAGE).as_posix()}\0{code}\0".encode())
    if added and cache is not None:
        merged = list({**known, **added}.items())[-_CACHE_ENTRIES:]
        with contextlib.suppress(OSError):
            cache.parent.mkdir(parents=True, exist_ok=True)
            temp = cache.with_name(f".{cache.name}.{os.getpid()}.tmp")
            temp.write_text(json.dumps(dict(merged)))
            os.replace(temp, cache)  # whole or not at all, whoever writes it at once
    return digest.hexdigest()


def _cache_file() -> Path | None:
    """Where the code hashes are kept: ``$XDG_CACHE_HOME/memframe`` or ``~/.cache/memframe``
    (None when there is no home)."""
    base = os.environ.get("XDG_CACHE_HOME")
    try:
        root = Path(base) if base else Path.home() / ".cache"
    except RuntimeError:
        return None
    return root / "memframe" / "code-identity.json"


def is_derived(name: str) -> bool:
    """Whether a table or watermark name is derived state.

    Examples:
        >>> is_derived("projections/session"), is_derived("capsules"), is_derived("import:nmemory")
        (True, False, False)
        >>> is_derived("derived/episodes")  # where an earlier version kept the episodes
        True
    """
    return name.startswith(_ROOTS)


def mark() -> dict[str, str]:
    """The `WRITER` watermark this code records (a watermark is a number or an object)."""
    return {"code": writer()}


def current(watermarks: Mapping[str, Any]) -> bool:
    """Whether the derived state these watermarks describe was written by this code."""
    return watermarks.get(WRITER) == mark()


def files_present(snapshot: Snapshot, root: Path,
                  present: Callable[[str], bool] | None = None) -> bool:
    """Whether every derived partition ``snapshot`` names is on disk under ``root`` (one
    stat each; or ``present(path)``: a remote store's listing). A vacuum removes the
    derived files later generations replaced, while the canonical files of an old
    generation (appended, never replaced) usually remain."""
    there = present or (lambda path: (root / path).exists())
    return all(there(p.path)
               for t, parts in snapshot.tables.items() if is_derived(t) for p in parts)


def visible(snapshot: Snapshot, root: Path | None = None,
            present: Callable[[str], bool] | None = None) -> Snapshot:
    """``snapshot`` as this code may read it: without derived tables and watermarks when
    another code wrote them (the same snapshot, at no cost, when this code did), or, with
    ``root`` (time travel to an older generation), when a file of its derived state is
    gone: a reader then folds from the canonical rows, as it would with no state."""
    if current(snapshot.watermarks) and (root is None or files_present(snapshot, root, present)):
        return snapshot
    if not any(is_derived(t) for t in snapshot.tables) and not any(
            is_derived(m) for m in snapshot.watermarks):
        return snapshot
    return dataclasses.replace(
        snapshot,
        tables={t: p for t, p in snapshot.tables.items() if not is_derived(t)},
        watermarks={m: v for m, v in snapshot.watermarks.items() if not is_derived(m)},
    )


def settle(snapshot: Snapshot, staged: Mapping[str, Any], wrote_derived: bool
           ) -> tuple[dict[str, Any], list[str]]:
    """The watermarks a commit records and the derived partitions it must drop.

    ``staged`` are the commit's watermarks (started from `visible`), ``wrote_derived``
    whether it staged derived rows. A commit that writes derived state over state another
    code wrote drops every stale partition and records this code as the writer; one that
    writes none keeps the stale marks as they were (its own view never saw them).
    """
    marks = dict(staged)
    if current(snapshot.watermarks):
        return marks, []
    seen = visible(snapshot).watermarks
    touched = wrote_derived or any(
        is_derived(m) and marks.get(m) != seen.get(m) for m in {*marks, *seen})
    if not touched:
        stale = {m: v for m, v in snapshot.watermarks.items() if is_derived(m)}
        return {**stale, **marks}, []
    marks[WRITER] = mark()
    drop = [p.path for t, parts in snapshot.tables.items() if is_derived(t) for p in parts]
    return marks, drop


def without_erased(rows: pl.DataFrame, erased: Collection[int]) -> pl.DataFrame | None:
    """A text table's ``rows`` without those of the ``erased`` capsule numbers (the others
    in their order; ``rows`` itself when none is erased), or None when the table must be
    dropped whole: one with a `TEXT_NAMES` column that names an erased capsule, or one
    with neither column (nothing says whose text a row holds).

    Examples:
        >>> rows = pl.DataFrame({"num": [1, 2, 3], "headline": ["a", "b", "c"]})
        >>> without_erased(rows, {2}).rows()
        [(1, 'a'), (3, 'c')]
        >>> kept = pl.DataFrame({"text": ["x", "y"], "names": ["1", "3 4"]})
        >>> without_erased(kept, {2}).height, without_erased(kept, {4}) is None
        (2, True)
        >>> without_erased(pl.DataFrame({"k": [0], "text": ["x"]}), {2}) is None
        True
    """
    gone = pl.Series(sorted(erased), dtype=pl.Int64).implode()
    if TEXT_KEY in rows.columns:
        keep = ~pl.col(TEXT_KEY).is_in(gone).fill_null(False)
        return rows if rows.select(keep.all()).item() else rows.filter(keep)
    if TEXT_NAMES in rows.columns:
        numbers = pl.col(TEXT_NAMES).str.split(" ").explode().cast(pl.Int64, strict=False)
        named = rows.select(numbers.is_in(gone).fill_null(False).any()).item()
        return None if named else rows
    return None
