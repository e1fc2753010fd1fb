"""``digest`` and ``digest_tables``: validate, pin, read once, assemble."""

from __future__ import annotations

import datetime as _dt
import random
import time
from collections.abc import Mapping
from typing import Any

import polars as pl

from memframe import budget
from memframe.digest.assemble import assemble
from memframe.digest.params import (
    HEADLINES_DEFAULT,
    list_cap,
    validate_headlines,
    validate_now,
    validate_project_prefix,
    validate_verify,
)
from memframe.digest.reads import digest_failed, open_source, tables_source
from memframe.digest.result import Digest
from memframe.digest.source import DigestSource, TableSource
from memframe.errors import (
    CorruptStoreError,
    DamagedDerivedError,
    DigestFailedError,
    DigestFailedOnCorruptStoreError,
    DigestParameterError,
    InvalidInputError,
    MemframeError,
)
from memframe.store import Store, StoreView

__all__ = ["digest", "digest_tables", "pinned_source", "reference_read", "Digest",
           "HEADLINES_DEFAULT"]


def _pin(store: Any) -> Any:
    if not isinstance(store, StoreView):
        raise InvalidInputError(
            f"the digest reads a store, got {type(store).__name__} {store!r:.80}; pass "
            f"mf.Store.open(path) (or a view of one: store.at(g), store.as_of(t))"
        )
    return store.pinned()


def _check_known_hash(known_hash: object) -> None:
    if known_hash is not None and not isinstance(known_hash, str):
        raise InvalidInputError(f"known_hash must be a hex string or None, got {known_hash!r}")


def pinned_source(store: Any, now: _dt.datetime | None, open_: Any) -> DigestSource:
    """``open_(view, now)`` on one pinned generation of ``store``, with ``now`` checked
    (the store's clock when None); on a `Store`, pinned again if a vacuum removes what it
    pinned."""
    view = _pin(store)
    now = validate_now(view.now() if now is None else now)
    if isinstance(store, Store):
        return store.read(lambda v: open_(v, now))
    return open_(view, now)


def digest(
    store: Any,
    headlines: int | None = HEADLINES_DEFAULT,
    project_prefix: str | None = None,
    known_hash: str | None = None,
    now: _dt.datetime | None = None,
    verify: str = "incremental",
    memory_limit: str | int | None = None,
) -> Digest:
    """The session-start digest of a store (or of a frozen view of one).

    Args:
        store: a ``Store`` or a frozen view (``store.at(g)``, ``store.as_of(t)``); one
            generation is pinned for the whole call.
        headlines: the list cap N, a non-negative int (default 10; None means the
            default). Totals stay exact.
        project_prefix: fence the capsule sections to ``p`` and ``p/...``; blank or
            ``/``-terminated prefixes are rejected before anything is read.
        known_hash: the ``hash`` of a digest the caller already holds; when it matches,
            the result is ``unchanged`` and carries no bodies.
        now: the instant for the ``expired`` flags and ``archive_candidates``; defaults
            to the store's clock.
        verify: ``"incremental"`` (default) checks the journal rows written since the
            verified checkpoint and confirms the older parts are the very files that were
            verified (falling back to the full walk when anything differs); ``"full"``
            walks the whole hash chain and folds every capsule's state from the
            canonical rows, trusting no kept state (all at once while that fits the
            memory budget and 2 GB, else one range of capsule numbers at a time).
            Both give the same answer for the same store.
        memory_limit: the most memory a fold of every row may hold (e.g. ``"2GB"``;
            default: the budget in force, `memframe.budget`); the answer is the same.

    Returns:
        A :class:`Digest`.

    Raises:
        DigestParameterError: a ``project_prefix`` that can match nothing.
        InvalidInputError: a bad ``headlines``, ``known_hash`` or ``now``.
        DigestFailedError: ``memory_digest failed: ...`` when a fail-closed read fails (a
            `MemframeError`).

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> clock = lambda: dt.datetime(2026, 7, 23, 12, tzinfo=dt.UTC)
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=clock)
        >>> d = mf.digest(store)
        >>> d.to_json()[:60]
        '{"label":"ADVISORY_NOT_AUTHORITY","framing":"DATA","total":0'
        >>> _ = store.ingest({"content": "first note", "source": "chat", "anchor": "a"})
        >>> mf.digest(store, headlines=1).to_dict()["newest"][0]["headline"]
        'first note'
        >>> mf.digest(store, known_hash=d.hash).unchanged
        False
    """
    n = validate_headlines(headlines)
    prefix = validate_project_prefix(project_prefix)
    _check_known_hash(known_hash)
    verify = validate_verify(verify)
    before = store.io_counts() if isinstance(store, StoreView) else None
    with budget.memory_limit(memory_limit):
        source, body = _read_and_assemble(store, now, verify, list_cap(n), prefix)
    after = store.io_counts() if before is not None else None
    return Digest(
        body,
        known_hash=known_hash,
        rows_visited=source.rows_visited(),
        generation=source.generation,
        project_prefix=prefix,
        headlines=n,
        io=None if before is None or after is None else {k: after[k] - before[k] for k in after},
    )


def reference_read(store: Any, n: int, prefix: str | None
                   ) -> tuple[TableSource, dict[str, Any]]:
    """The reference source (`TableSource`: every capsule's state, the tables in full) and
    the wire body ``digest(store, n, prefix, verify="full")`` answers from it: one pinned
    generation, one instant (the store's clock), the digest's own door and assembler.
    ``n`` and ``prefix`` are validated by the caller."""
    source, body = _read_and_assemble(store, None, "full", n, prefix, reference=True)
    if not isinstance(source, TableSource):  # pragma: no cover - "full" reads the reference
        raise AssertionError(f"verify='full' read {type(source).__name__}")
    return source, body


def _reads_whole(view: Any, verify: str, reference: bool) -> bool:
    """Does this digest read the reference `TableSource`: asked for (`explain`), or under
    ``verify="full"`` when every row it reads fits the memory budget at once (one fold of
    every row is quicker than ranges of them; `memframe.budget.fits_whole`). Otherwise, a
    fold of every row that lies ahead (``verify="full"``, or no kept state) must fit the
    budget one range at a time: refused before the chain walk when it cannot."""
    from memframe.digest.reads import FAIL_CLOSED
    from memframe.digest.state import cold_fold, digest_capsules

    if reference:
        return True
    if verify == "full" and budget.fits_whole(sum(int(view.row_count(t)) for t in FAIL_CLOSED)):
        return True
    if verify == "full" or digest_capsules.watermark_of(view) is None:
        cold_fold.range_size(view)  # raises MemoryBudgetError
    return False


#: how often a digest runs again on a newer generation when files it read were removed
_AGAIN = 20


def _read_and_assemble(store: Any, now: _dt.datetime | None, verify: str, n: int,
                       prefix: str | None, reference: bool = False
                       ) -> tuple[DigestSource, dict[str, Any]]:
    """Read and assemble on one pinned generation. On a `Store`, a generation whose files
    were removed while the digest read them (another handle erased or compacted, then
    vacuumed) is left for the newer one, and the digest runs again there; a damaged
    derived file (the digest's kept state) is answered from the canonical tables
    (``verify="full"`` reads no derived state) while the next cycle writes it again."""
    def run(view: Any, mode: str) -> tuple[DigestSource, dict[str, Any]]:
        source = pinned_source(view, now, lambda v, t: open_source(
            v, t, mode, n, prefix, _reads_whole(v, mode, reference)))
        return source, assemble(source, n, prefix)

    if not isinstance(store, Store):
        return run(store, verify)
    for attempt in range(_AGAIN + 1):
        view = store.pinned()
        try:
            return run(view, verify)
        except (InvalidInputError, DigestParameterError):
            raise
        except (MemframeError, OSError, pl.exceptions.ComputeError) as exc:
            found = store.explain_fault(exc, view.snapshot)
            if found is exc:
                raise  # every file of the pinned generation is whole: the error stands
            if attempt < _AGAIN and store.generation != view.generation:
                time.sleep(random.uniform(0, 0.002 * (attempt + 1)))
                continue  # removed under it: run again on the newer generation
            if isinstance(found, DamagedDerivedError) and verify != "full":
                return run(view, "full")
            if isinstance(found, DigestFailedError):
                raise found from exc
            if isinstance(found, CorruptStoreError):
                # the digest fails closed with its own prefix (reference 5), and says which
                # file and what fixes it (a CorruptStoreError too, for those who catch it)
                raise DigestFailedOnCorruptStoreError(
                    f"memory_digest failed: {found}") from exc
            raise digest_failed(found) from exc
    raise AssertionError("unreachable")  # pragma: no cover


def digest_tables(
    tables: Mapping[str, pl.LazyFrame | pl.DataFrame],
    *,
    now: _dt.datetime,
    headlines: int | None = HEADLINES_DEFAULT,
    project_prefix: str | None = None,
    known_hash: str | None = None,
) -> Digest:
    """The digest of hand-made canonical tables (name -> frame; missing tables are empty).

    Examples:
        >>> import datetime as dt
        >>> d = digest_tables({}, now=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        >>> d.to_dict()["dag"]["status"], d.rows_visited
        ('ok', 0)
    """
    n = validate_headlines(headlines)
    prefix = validate_project_prefix(project_prefix)
    _check_known_hash(known_hash)
    source = tables_source(tables, validate_now(now))
    body = assemble(source, list_cap(n), prefix)
    return Digest(
        body,
        known_hash=known_hash,
        rows_visited=source.rows_visited(),
        project_prefix=prefix,
        headlines=n,
    )
