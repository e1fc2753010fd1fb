"""Import an nMEMORY store (one SQLite file, schema v20 or v21) into a memframe store.

nMEMORY 0.2.x writes schema 20; 0.3.0 writes 21 and migrates every older store it opens to
21 in place (one DDL change: ``about`` joins the relation kinds). Both are read; an
incremental import goes on across that migration. A 0.1.x store (schema 11) is refused
with the advice to open it once with nMEMORY 0.3.0, which migrates it to 21.

The mapping follows spec/digest-reference.md section 6 (the SQLite schema) and sections 2
and 4 (what each column means). One import is one memframe commit:

* ``capsules`` -> ``capsules``: ``canonical_json`` (Capsule v1) decoded into the capsule
  columns; ids, seq order and ``created_at`` kept exactly (nanoseconds); ``session_id``
  becomes ``conversation_id``. A tombstoned capsule (NULL JSON) becomes a capsule row
  without content (``content_chars`` 0: the source no longer holds the text) plus a
  ``forgets`` row with the tombstone's mode (``purged`` -> ``purge``, ``redacted`` ->
  ``redact``), time and reason.
* ``usage`` -> one ``recalls`` row per capsule (count = recall_count, at =
  last_recalled_at), exact under the sum/max fold.
* ``sessions`` -> ``brackets`` start/finish rows; ``classifications``, ``tiers``,
  ``relations`` (with origin), ``recall_misses``, ``lane_overrides``, ``corroborations``
  and ``source_cursors`` map one to one.
* ``audit_events`` -> ``journal`` rows keeping the audit seq and ``chained_hash``, so the
  chain verifies with memframe's own verifier. The import adds no journal row of its own.
* ``review_events`` -> ``reviews`` and ``pin_events`` -> ``pins`` (``pinned`` 0/1 becomes a
  boolean), one row per event in seq order: the staged and pinned state of the digest
  (reference 2.1, 2.2, 4.17) is the latest row per capsule, as in the source.

Importing again into the same store appends only what changed since the last import
(watermark ``import:nmemory`` in the store's log) and refuses a source that was rewritten
in a way that cannot be an append.

The package: ``source`` (the SQLite file), ``convert`` (row checks and conversions),
``plan`` (what a full or incremental import appends), ``report`` (the ImportReport); this
module lands the plan as one commit.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from memframe import schema as S
from memframe.errors import (
    ImportSourceError,
    MemframeError,
    SchemaValidationError,
    SourceRewrittenError,
)
from memframe.importers.nmemory.common import (
    _NO_MARK,
    _SEQ_TABLES,  # noqa: F401  (the package's names, patched together by tests)
    DEFAULT_BATCH_ROWS,
    OPERATION,
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    SOURCE_TABLES,  # noqa: F401
    WATERMARK,
)
from memframe.importers.nmemory.convert import (
    _Notes,
)
from memframe.importers.nmemory.plan import (
    _full_plan,
    _incremental_plan,
    _Plan,
    _Progress,
    _seq_marks,
)
from memframe.importers.nmemory.report import (
    ImportReport,
)
from memframe.importers.nmemory.source import (
    _Source,
)
from memframe.store import Store, capture

__all__ = [
    "import_nmemory",
    "ImportReport",
    "ImportSourceError",
    "SourceRewrittenError",
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "WATERMARK",
]


# ---- the target and the commit -----------------------------------------------------------

def _target(path: Path, clock: Any) -> tuple[Store | None, bool]:
    """(an existing store, or None when one must be created; whether ``path`` existed)."""
    if not path.exists():
        return None, False
    if path.is_dir() and not any(path.iterdir()):
        return None, True
    if Store.is_store(path):
        return Store.open(path, clock=clock), True
    raise ImportSourceError(
        f"{path} already holds something that is not a memframe store; import into a new "
        f"path or into a store an earlier nMEMORY import created"
    )


def _sink(c: capture.Commit) -> Callable[[str, pl.DataFrame, str], None]:
    """Append a plan's rows to commit ``c`` as they are read; each table's full
    partitions are written at once (`Commit.flush`), so the import holds about a
    partition per table, not the source."""
    def add(table: str, frame: pl.DataFrame, source: str) -> None:
        if table == "journal":  # the source's chain, kept with its seqs and hashes
            try:
                c.append_journal(frame)
            except (SchemaValidationError, MemframeError) as exc:
                raise ImportSourceError(f"source table {source} cannot be stored as the "
                                        f"memframe journal: {exc}") from None
        else:
            try:
                c.append(table, frame.select(
                    [n for n in S.table_schema(table).names() if n != "seq"]))
            except SchemaValidationError as exc:
                raise ImportSourceError(f"source table {source} cannot be stored as "
                                        f"memframe {table}: {exc}") from None
        c.flush(table)

    return add


def _importing(src: _Source, base_generation: int, mark: dict[str, Any] | None,
               watermark: dict[str, Any], notes: _Notes, bar: _Progress,
               batch_rows: int) -> Callable[[capture.Commit], _Plan]:
    """The import's commit: it reads the source while it stages (a full import, or what
    changed since ``mark``) and records the watermark; nothing when nothing changed."""
    def run(c: capture.Commit) -> _Plan:
        if c.generation != base_generation:
            raise ImportSourceError(
                "another writer committed to the store while the import was reading; "
                "nothing was written: run the import again"
            )
        plan = _Plan(c.generation, _sink(c))
        if mark is None:
            _full_plan(src, plan, notes, bar, batch_rows)
        else:
            _incremental_plan(src, c.view, mark, plan, notes, bar, batch_rows)
        # after the rows: a row's own error names it, which says more than the counts
        nulls = src.count("capsules", "canonical_json IS NULL")
        tombstones = src.count("tombstones")
        if nulls != tombstones:
            raise ImportSourceError(
                f"{src.path} has {nulls} capsule(s) without canonical_json but "
                f"{tombstones} tombstone(s); the source is inconsistent"
            )
        if mark is not None and plan.empty:
            return plan  # the store stays as it is
        for cid, mode in plan.erase.items():
            c.erase(cid, mode)
        c.reserve_ids(capsules=plan.capsules, sessions=plan.sessions)
        c.set_watermark(WATERMARK, {**watermark, "store_seq": c.seq})
        return plan

    return run


def import_nmemory(
    sqlite_path: str | Path,
    store_path: str | Path,
    *,
    progress: bool | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    clock: Callable[[], Any] | None = None,
) -> ImportReport:
    """Import an nMEMORY store (its SQLite file, schema v20 or v21) into a memframe store.

    The source is opened read-only and read in one consistent snapshot; it is never
    written. A ``store_path`` that does not exist (or is an empty directory) gets a new
    store filled with everything the digest reads; a store an earlier import of the same
    source filled gets only what changed since (new capsules, edges, usage deltas,
    tombstones with content erasure, labels, tiers, brackets and journal rows). Either way
    the import is one commit, and adds no journal rows of its own: the source's audit
    chain is copied with its seqs and hashes, so it verifies with memframe's verifier.

    A tombstoned source capsule keeps no text, so its row gets ``content`` NULL,
    ``content_chars`` 0, the tombstone's provenance source (or ``"nmemory-tombstone"``)
    and anchor (or its own id), confidence 0.6, no ``valid_to`` and no taint. A capsule
    tombstoned after an earlier import keeps the metadata that import saw; its content is
    erased from the data files. ``review_events`` and ``pin_events`` become ``reviews`` and
    ``pins`` rows (so the digest's staged and pinned sections equal the engine's); every
    table the digest does not read is not imported, and the report lists those with row
    counts.

    Args:
        sqlite_path: the nMEMORY SQLite file.
        store_path: the memframe store to create or to bring up to date.
        progress: show a progress bar on stderr; None (default) shows one only when
            stderr is a terminal.
        batch_rows: rows read from SQLite per batch for the big tables.
        clock: the store's clock (``() -> aware datetime``), for a new store's handle.

    Returns:
        An `ImportReport` with per-table counts (text via ``str()``, HTML in notebooks).

    Raises:
        ImportSourceError: the file is not an nMEMORY v20/v21 SQLite store, a row is corrupt,
            the target holds something else, or (`SourceRewrittenError`) the source was
            rewritten since the last import in a way that is not an append. Nothing is
            written to the target (a store this call would have created is not left).

    Examples:
        >>> import sqlite3, tempfile, os
        >>> import memframe as mf
        >>> tmp = tempfile.mkdtemp()
        >>> db = os.path.join(tmp, "memory.db")
        >>> con = sqlite3.connect(db)
        >>> _ = con.executescript("CREATE TABLE capsules (seq); PRAGMA user_version = 19;")
        >>> con.close()
        >>> try:
        ...     mf.importers.import_nmemory(db, os.path.join(tmp, "store"))
        ... except mf.MemframeError as exc:
        ...     print(str(exc).split(";")[0].endswith("has nMEMORY schema version 19"))
        True
        >>> os.path.exists(os.path.join(tmp, "store"))
        False
    """
    started = time.perf_counter()
    target = Path(store_path)
    notes = _Notes()
    src = _Source(sqlite_path)
    bar: _Progress | None = None
    try:
        store, existed = _target(target, clock)
        mark = store.watermarks.get(WATERMARK) if store is not None else None
        identity = src.identity()
        marks = _seq_marks(src)
        counts = {t: (marks[t]["rows"] if t in marks else src.count(t)) for t in src.tables}
        if store is not None and mark is None and int(store.counters.get("seq", 0)):
            raise ImportSourceError(
                f"{target} is a memframe store with rows no nMEMORY import wrote; import "
                f"into a new path (an incremental import only extends its own imports)"
            )
        if mark is not None:
            assert store is not None  # a mark is read from a store
            for name, value in mark["identity"].items():
                if value is not None and identity.get(name) != value:
                    raise ImportSourceError(
                        f"{target} was imported from a different nMEMORY store "
                        f"({mark['source']}); its {name} does not match {src.path}"
                    )
            was = int(mark.get("schema_version", 20))
            if src.version < was:
                raise SourceRewrittenError(
                    f"{src.path} has nMEMORY schema version {src.version}, but {target} was "
                    f"imported from it at schema version {was}; no nMEMORY release migrates a "
                    f"store down, so this is an older copy of the store: import the current "
                    f"file, or this one into a new path"
                )
            if src.version > was:  # the engine migrated the source in place (0.3.0 does)
                notes.add(f"the source was migrated from schema version {was} to "
                          f"{src.version} (nMEMORY {SCHEMA_VERSIONS[src.version]}) since the "
                          f"last import; the import goes on from where that one stopped")
            if int(store.counters.get("seq", 0)) != int(mark["store_seq"]):
                raise ImportSourceError(
                    f"{target} was written to since its last nMEMORY import; an incremental "
                    f"import needs the store as that import left it: import into a new path"
                )
            todo = sum(counts[t] for t in src.tables if t not in src.seq_tables) + sum(
                max(0, counts[t] - mark["tables"].get(t, _NO_MARK)["rows"])
                for t in src.seq_tables)
        else:
            todo = sum(counts.values())
        bar = _Progress(progress, todo, "nmemory import")
        watermark = {
            "source": str(src.path.resolve()),
            "schema_version": src.version,
            "identity": identity,
            "tables": {t: marks[t] for t in src.seq_tables},
            "imports": (mark["imports"] + 1) if mark is not None else 1,
        }
        skipped = src.skipped_tables()
        created = store is None
        if store is None:
            store = Store.create(target, clock=clock)
        try:
            plan = store.commit(_importing(src, store.generation, mark, watermark, notes, bar,
                                           batch_rows), operation=OPERATION)
        except BaseException:
            if created:
                with contextlib.suppress(MemframeError):
                    store.discard_if_unused(remove_root=not existed)
            raise
        generation = store.generation
        mode = "full" if mark is None else "unchanged" if plan.empty else "incremental"
    except sqlite3.Error as exc:
        raise ImportSourceError(f"cannot read {src.path}: {exc}") from None
    else:
        return ImportReport(
            source=str(src.path),
            store=str(target),
            mode=mode,
            generation=generation,
            source_rows=counts,
            read={t: src.read_rows.get(t, 0) for t in src.tables},
            added=plan.added() if mode != "unchanged" else {},
            erased=len(plan.erase),
            skipped=skipped,
            notes=notes.items,
            seconds=time.perf_counter() - started,
        )
    finally:
        if bar is not None:
            bar.close()
        src.close()
