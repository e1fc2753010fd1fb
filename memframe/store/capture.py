"""The write verbs. Each verb adds rows to a `Commit`; the store lands a commit as one generation.

A verb validates everything before it adds a row, so a refused call writes nothing. The
journal rows of a commit are chained at the end (reference 4.14): one row per mutation.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe import schema as S
from memframe.errors import (
    InvalidInputError,
    SessionError,
    TombstonedContentError,
    UnknownCapsuleError,
)
from memframe.frames import strictly_increasing
from memframe.ids import (
    CAPSULE_PREFIX,
    SESSION_ID_RULE,
    SESSION_PATTERN,
    capsule_id,
    capsule_number,
    capsule_number_expr,
    session_number,
)
from memframe.store import derived, tables
from memframe.store.log import TABLE_NAME_RE, watermark_problem
from memframe.store.spill import SpilledRows
from memframe.store.tables import constant
from memframe.text import fold_expr, fold_terms, instants_ns, journal_lines, sha256_hex

if TYPE_CHECKING:
    from memframe.store.index import Indexes
    from memframe.store.log import Part, Snapshot

DEFAULT_PROJECT = "default"
DEFAULT_CONFIDENCE = 0.6
DEFAULT_AUTHORITY = "agent-inferred"
SESSION_FINISH_SOURCE = S.HANDOFF_SOURCE  # the digest's bracket handoffs (reference 2.3)

INGEST_COLUMNS = (
    "content",
    "source",
    "anchor",
    "project_id",
    "kind",
    "confidence",
    "created_at",
    "valid_from",
    "valid_to",
    "authority_class",
    "instruction_taint",
    "conversation_id",
    "author",
    # nMEMORY 0.3.0's sidecars, written to event_times and epistemics (not to capsules)
    "event_at",
    "event_from",
    "event_to",
    "evidence_state",
    "proof_hint",
    "stale_if",
)
_STRING_COLUMNS = ("content", "source", "anchor", "project_id", "kind", "authority_class",
                   "conversation_id", "author", "evidence_state", "proof_hint", "stale_if")
_TIME_COLUMNS = ("created_at", "valid_from", "valid_to")


def check_derived_name(table: Any) -> None:
    """Refuse a derived table name that is not ``projections/<...>`` or ``derived/<...>``.

    A derived write replaces or adds partitions of that table: a canonical table's name
    would replace the canonical rows, and a name the log refuses would brick the store.

    Examples:
        >>> check_derived_name("projections/session/partials/T0")
        >>> check_derived_name("capsules")
        Traceback (most recent call last):
        ...
        memframe.errors.InvalidInputError: derived table 'capsules' is refused: derived tables live under projections/ (e.g. 'projections/mine'), never a canonical table; nothing was written
    """
    parts = table.split("/") if isinstance(table, str) else []
    if (not isinstance(table, str) or not TABLE_NAME_RE.match(table) or len(parts) < 2
            or not table.startswith(derived.PREFIX) or any(len(p) > 100 for p in parts)):
        raise InvalidInputError(
            f"derived table {table!r:.80} is refused: derived tables live under projections/ "
            f"(e.g. 'projections/mine'), never a canonical table; nothing was written"
        )


def _vocab_error(what: str, value: Any, allowed: Iterable[Any]) -> InvalidInputError:
    listed = ", ".join(repr(a) for a in allowed)
    return InvalidInputError(f"unknown {what} {value!r}; allowed: {listed}")


_JOURNAL_STAGED = {"at": S.TIMESTAMP, "action": pl.String(), "subject": pl.String(),
                   "reason": pl.String()}


def chain_hashes(prev: str, lines: pl.Series) -> list[str]:
    """Each line's chained hash after ``prev`` (reference 4.14): ``sha256(prev + line)``.

    The one sequential step of a commit: every link needs the one before it.

    Examples:
        >>> import polars as pl
        >>> [h[:12] for h in chain_hashes("", pl.Series(["a", "b"]))]
        ['ca978112ca1b', 'd107b7d07504']
    """
    out: list[str] = []
    append = out.append
    sha256 = hashlib.sha256
    for line in lines.to_list():
        prev = sha256((prev + line).encode("utf-8")).hexdigest()
        append(prev)
    return out


#: the columns naming capsules in the tables an ingest stages: where a rebase that moves
#: new capsules past a winner's renumbers their ids (`Commit.moves_past_capsules`)
ID_COLUMNS: dict[str, tuple[str, ...]] = {
    "capsules": ("id",), "journal": ("subject",), "classifications": ("capsule_id",),
    "event_times": ("capsule_id",), "epistemics": ("capsule_id",)}


def moved_ids(column: str, above: int, by: int) -> pl.Expr:
    """``column`` with every capsule id numbered above ``above`` moved up by ``by``
    (`Commit.moved_id` as an expression).

    Examples:
        >>> import polars as pl
        >>> pl.DataFrame({"s": ["cap-2", "cap-5", "sess-9", None]}).select(
        ...     moved_ids("s", 3, 10))["s"].to_list()
        ['cap-2', 'cap-15', 'sess-9', None]
    """
    number = capsule_number_expr(column)
    return (pl.when(number > above).then(pl.format(CAPSULE_PREFIX + "{}", number + by))
            .otherwise(pl.col(column)).alias(column))


class Commit:
    """Rows one generation will add, built by verbs against a pinned snapshot."""

    def __init__(
        self,
        snapshot: Snapshot,
        indexes: Indexes,
        *,
        now: datetime.datetime,
        actor: str,
        read_part: Callable[[Part], pl.DataFrame],
        view: Callable[[], Any] | None = None,
        write_part: Callable[[str, pl.DataFrame], tuple[Any, dict[str, Any]]] | None = None,
    ):
        self.snapshot = snapshot
        self._indexes = indexes
        # whether a verb consulted stored state beyond the id counters and a hash lookup
        # that found nothing (`appends_fresh`)
        self._read_stored = False
        self.now = now
        self.actor = actor
        self._read_part = read_part  # the store's reader: capture does no I/O itself
        self._view = view
        self._write_part = write_part  # the store's writer, for `flush` (None: never early)
        # partitions `flush` wrote before the commit lands: (file, its log entry's add)
        self.flushed: list[tuple[Any, dict[str, Any]]] = []
        self.flushed_tables: set[str] = set()
        self.seq = int(snapshot.counter("seq"))
        self.capsules = int(snapshot.counter("capsules"))
        self.sessions = int(snapshot.counter("sessions"))
        self.frames: dict[str, list[pl.DataFrame]] = {}
        self.derived: dict[str, tuple[list[pl.DataFrame | SpilledRows], bool,
                                     int | tuple[int, ...] | None]] = {}
        # partitions replaced by one new file: key -> (old parts, table, new rows)
        self.rewrites: dict[str, tuple[list[Part], str, pl.DataFrame]] = {}
        # derived marks another code wrote are not this commit's to read (store.derived)
        self._seen_marks = dict(derived.visible(snapshot).watermarks)
        self.watermarks: dict[str, Any] = dict(self._seen_marks)
        self.operations: list[str] = []
        self.erases = False  # whether this commit erases content (redact/purge)
        self.erased: set[int] = set()  # the numbers of the capsules it erases
        self._merges: set[str] = set()  # rewrites that keep every row (replace_parts)
        self._relabel: Callable[[Any, int], Any] | None = None  # see allow_rebase
        self._moves_ids = False  # see allow_rebase
        #: how far a rebase moved the new capsules' ids (past winners' new capsules)
        self.capsule_shift = 0
        # staged journal rows: single rows as tuples, bulk verbs' rows as frames
        self._journal: list[tuple[datetime.datetime, str, str, str | None] | pl.DataFrame] = []
        # what this commit adds, so later verbs of one transaction see it
        self._new_hashes: list[pl.DataFrame] = []  # (h, id) of contents this commit added
        self._new_relations: set[tuple[str, str, str]] = set()
        self._new_aliases: set[tuple[str, str]] = set()
        self._new_forgets: dict[str, str] = {}
        self._new_processing: set[str] = set()
        self._new_sessions: dict[str, list[Any]] = {}  # sid -> [project, finished]

    @property
    def indexes(self) -> Indexes:
        """The store's lookups at the pinned snapshot (a use is a read of stored state)."""
        self._read_stored = True
        return self._indexes

    # -- generic appends ------------------------------------------------------------------
    @property
    def empty(self) -> bool:
        return not (self.frames or self.derived or self.rewrites or self._journal
                    or self.watermarks != self._seen_marks)

    def _take_seq(self, n: int) -> pl.Series:
        start = self.seq + 1
        self.seq += n
        return pl.int_range(start, start + n, dtype=pl.Int64, eager=True).alias("seq")

    def append(self, table: str, frame: pl.DataFrame) -> pl.DataFrame:
        """Assign ``seq`` to ``frame``'s rows, validate them, and stage them for ``table``."""
        if frame.height == 0:
            return frame
        frame = frame.with_columns(self._take_seq(frame.height)).select(S.table_schema(table).names())
        frame = S.validate_frame(table, frame)
        self.frames.setdefault(table, []).append(frame)
        return frame

    def discard_flushed(self) -> None:
        """Remove the partitions `flush` wrote (the commit will not land them)."""
        for path, _add in self.flushed:
            path.unlink(missing_ok=True)
        self.flushed.clear()

    def flush(self, table: str) -> None:
        """Write the rows staged for canonical ``table`` that fill whole partitions
        (`tables.part_rows` rows, as landing splits them) now, and keep only the rest
        staged.

        A bulk load (the import of a large file) then holds a partition's rows at a time,
        not all of them until it lands. The files are the ones landing would write (same
        rows, same partitions); they are linked when the commit lands and removed if it
        does not. Without a writer (a transaction) the rows stay staged.
        """
        part_rows = tables.part_rows(table)
        staged = self.frames.get(table, [])
        rows = sum(f.height for f in staged)
        if self._write_part is None or rows < part_rows:
            return
        # not rechunked: the rest kept staged holds only the chunks it overlaps
        whole = pl.concat(staged, how="vertical", rechunk=False)
        staged.clear()
        done = 0
        while rows - done >= part_rows:
            self.flushed.append(self._write_part(table, whole.slice(done, part_rows)))
            self.flushed_tables.add(table)
            done += part_rows
        if done < rows:
            staged.append(whole.slice(done))
        else:
            del self.frames[table]

    def _now_frame(self, n: int) -> pl.Series:
        return pl.Series("at", [self.now] * n, dtype=S.TIMESTAMP)

    def journal(self, action: str, subject: str, reason: str | None = None) -> None:
        self._journal.append((self.now, action, subject, reason))

    def journal_many(self, action: str | pl.Series, subjects: Sequence[str] | pl.Series,
                     reasons: Sequence[str | None] | pl.Series | None = None) -> None:
        """Stage one journal row per subject, as a frame (a bulk verb writes many); the
        action is one name for all, or one per row."""
        subjects = pl.Series("subject", subjects, dtype=pl.String)
        if subjects.len() == 0:
            return
        n = subjects.len()
        self._journal.append(pl.DataFrame({
            "at": constant(self.now, n, S.TIMESTAMP),
            "action": (action.cast(pl.String) if isinstance(action, pl.Series)
                       else constant(action, n, pl.String)),
            "subject": subjects,
            "reason": (constant(None, n, pl.String) if reasons is None
                       else pl.Series("reason", reasons, dtype=pl.String)),
        }))

    def write_derived(self, table: str, frame: pl.DataFrame | SpilledRows, *, replace: bool,
                      row_group_rows: int | tuple[int, ...] | None = None) -> None:
        """Stage rows of a derived (projection) table; ``replace`` drops its current parts.
        Rows too many to hold may come spilled (`memframe.store.spill`). ``row_group_rows``:
        rows per Parquet row group, or the sizes of the first groups in order, the last
        repeated for the rest (`memframe.store.tables.write_part`).

        ``table`` lives under ``projections/`` or ``derived/`` (e.g.
        ``projections/session/L0``); a canonical table, or a name the log would refuse, is
        refused here, before anything is written.
        """
        check_derived_name(table)
        if not isinstance(frame, pl.DataFrame | SpilledRows):
            raise InvalidInputError(f"write_derived({table!r}, ...) takes a polars DataFrame; "
                                    f"got {type(frame).__name__}")
        if not isinstance(replace, bool):
            raise InvalidInputError(f"write_derived({table!r}, ...): replace is True or False; "
                                    f"got {replace!r:.40}")
        sizes = row_group_rows if type(row_group_rows) is tuple else (row_group_rows,)
        if row_group_rows is not None and not (sizes and all(
                type(n) is int and 1 <= n <= 1 << 30 for n in sizes)):
            raise InvalidInputError(f"write_derived({table!r}, ...): row_group_rows is a "
                                    f"positive row count, a tuple of them, or None; got "
                                    f"{row_group_rows!r:.40}")
        frames, old_replace, rg = self.derived.get(table, ([], False, row_group_rows))
        if replace:
            frames = []
        if isinstance(frame, SpilledRows) or any(isinstance(f, SpilledRows) for f in frames):
            # spilled rows are copied into their partition as they are: never joined
            frames = [f for f in frames if f.height]
            if frames and frame.height:
                raise InvalidInputError(f"write_derived({table!r}, ...): spilled rows are a "
                                        f"table's only staged rows (stage them with replace)")
        frames.append(frame)
        self.derived[table] = (frames, replace or old_replace, row_group_rows or rg)

    def set_watermark(self, name: str, value: Any) -> None:
        """Stage a job's watermark: a whole number >= 0, or a JSON object of its marks
        (refused before anything is written when it is neither, or its name is not a
        watermark name: `memframe.store.log.watermark_problem`)."""
        why = watermark_problem(name, value)
        if why is not None:
            raise InvalidInputError(f"set_watermark({name!r:.80}, ...) is refused: {why}; "
                                    f"nothing was written")
        self.watermarks[name] = value

    # -- the public writer surface (what store.commit(fn) hands to fn) -------------------
    @property
    def generation(self) -> int:
        """The generation this writer is pinned to (it lands as the next one)."""
        return int(self.snapshot.generation)

    @property
    def view(self) -> Any:
        """A read-only `StoreView` of the generation this writer is pinned to."""
        self._read_stored = True
        if self._view is None:
            raise InvalidInputError("this writer has no view of its store")
        return self._view()

    def ingest(self, rows: Any) -> list[str]:
        """`Store.ingest` inside this commit."""
        return ingest(self, rows)

    def relate(self, from_id: str, to_id: str, kind: str, *, origin: str = "manual") -> bool:
        """`Store.relate` inside this commit."""
        return relate(self, from_id, to_id, kind, origin=origin)

    def forget(self, capsule_id: str, mode: str = "tombstone", reason: str | None = None) -> bool:
        """`Store.forget` inside this commit."""
        return forget(self, capsule_id, mode, reason)

    def append_rows(self, table: str, rows: Any) -> int:
        """`Store.append` inside this commit (the verbs' rules, vectorised)."""
        return append_events(self, table, rows)

    def absorb(self, member_ids: Sequence[str], into_id: str) -> None:
        """Mark members absorbed by a rollup (processing rows and abstracted_into edges)."""
        absorb(self, member_ids, into_id)

    def record_summary(self, conversation_id: str, summary: str) -> None:
        """Land a summary the language seam returned for a conversation."""
        record_summary(self, conversation_id, summary)

    def erase(self, capsule_id: str, mode: str) -> None:
        """Erase a capsule's content bytes for a tombstone an import carries (no forgets row:
        the import appends the source's own)."""
        if mode not in ("redact", "purge"):
            raise _vocab_error("erasing forget mode", mode, ("redact", "purge"))
        self.require_capsule(capsule_id, live=False)
        self._new_forgets[capsule_id] = mode
        _erase_content(self, capsule_id)

    def reserve_ids(self, *, capsules: int = 0, sessions: int = 0) -> None:
        """Advance the id counters past ids an import wrote itself (``cap-<n>``/``sess-<n>``)."""
        self.capsules = max(self.capsules, int(capsules))
        self.sessions = max(self.sessions, int(sessions))

    def replace_parts(self, table: str, old: Sequence[Part], frame: pl.DataFrame) -> None:
        """Replace partitions of ``table`` by one holding ``frame`` (compaction: no row
        changes, so nothing is validated or renumbered)."""
        if not old:
            return
        key = "+".join(p.path for p in old)
        self.rewrites[key] = (list(old), table, frame)
        # a merge keeps every row: as many rows, the same seqs (each unique store-wide)
        seqs = frame["seq"] if "seq" in frame.columns else None
        lo = [p.seq_lo for p in old if p.seq_lo is not None]
        hi = [p.seq_hi for p in old if p.seq_hi is not None]
        if (seqs is not None and frame.height == sum(p.rows for p in old)
                and seqs.n_unique() == frame.height and seqs.null_count() == 0
                and (not frame.height or (seqs.min() == min(lo, default=None)
                                          and seqs.max() == max(hi, default=None)))):
            self._merges.add(key)
        else:
            self._merges.discard(key)

    def allow_rebase(self, relabel: Callable[[Any, int], Any] | None = lambda result, _g: result,
                     *, moves_ids: bool = False) -> None:
        """Let a lost race link what this commit staged on top of commits that only
        appended rows above its snapshot (`Log.rebase`) instead of staging it again.

        For commits whose staged files stay exact when rows arrive above what they read:
        a compaction (it rewrites parts the appends do not touch), the projections' fold
        (everything it folds is at or below its watermarks). It holds only while the
        commit stages no row of its own (`rebasable`); an erasure's own rows and new
        capsules that read nothing stored are renumbered instead (`renumberable`,
        `appends_fresh`: a verb that asks must read stored state only through this
        writer's lookups, which mark it read). ``relabel(result, generation)``
        gives ``fn``'s result for the generation the commit landed at instead; None
        withdraws the leave (a transaction handed its verbs' results out already).
        ``moves_ids``: ``relabel`` also maps the result's new capsule ids through
        `moved_id`, so new capsules may move past a winner's new capsules too
        (`moves_past_capsules`).
        """
        self._relabel = relabel
        self._moves_ids = moves_ids and relabel is not None

    @property
    def rebasable(self) -> bool:
        """Whether `allow_rebase` was asked and the commit stages no row (no seq, id or
        journal link of its own to renumber) and erases nothing."""
        return (self._relabel is not None and not self.frames and not self.flushed
                and not self._journal and not self.erases)

    @property
    def renumberable(self) -> bool:
        """Whether `allow_rebase` was asked and the rows this commit adds are an erasure's
        forgets rows and journal rows: on top of commits that only appended, the same rows
        with their ``seq`` (and the journal's ``audit_seq`` and links) moved past the
        newer generation's are what staging again would give (`Store._land` renumbers
        them). The forget rule reads only forgets rows, and a commit that erased or
        forgot-with-erasure is a true conflict (it erases), so no winner that only
        appended changes what it decided. No id of its own (``cap-``, ``sess-``), no
        imported journal, nothing written early."""
        return (self._relabel is not None and self.erases and not self.flushed
                and set(self.frames) <= {"forgets"} and not self._journal
                and self.capsules == int(self.snapshot.counter("capsules"))
                and self.sessions == int(self.snapshot.counter("sessions")))

    @property
    def appends_fresh(self) -> bool:
        """Whether `allow_rebase` was asked and the commit only appends rows of its own
        that read no stored state but the id counters: new capsules whose contents no
        stored capsule holds, as an ingest of new text stages them. On top of commits that
        added no capsule, whatever else they did (an erasure, a compaction, the cycle), the
        same rows with their ``seq`` (and the journal's ``audit_seq`` and links) moved past
        the newer generation's are what staging again would give: their ids are still
        free, their contents still new (only a new capsule brings a content), and nothing
        they decided was read from what those commits changed (`Store._land` renumbers
        them instead of staging again)."""
        return (self._relabel is not None and not self.erases and not self._read_stored
                and bool(self.frames) and "journal" not in self.frames
                and not self.flushed and not self.rewrites and not self.derived
                and self.watermarks == self._seen_marks and not self._new_forgets
                and self.sessions == int(self.snapshot.counter("sessions")))

    @property
    def moves_past_capsules(self) -> bool:
        """Whether the commit `appends_fresh` and its new capsules may also move past
        winners that added capsules: their ids shift up by as many as those added
        (`moved_id`; in every row that names them), as staging after them would number
        them, provided no winner's capsule holds one of their contents (`Store._land`
        looks: a content stored first answers its own id, a true conflict). Only the
        tables an ingest stages, whose capsule references are known columns
        (`ID_COLUMNS`), and only when the result's ids are relabelled (`allow_rebase`)."""
        return (self._moves_ids and self.appends_fresh
                and set(self.frames) <= set(ID_COLUMNS) and "capsules" in self.frames)

    def moved_id(self, cid: str) -> str:
        """``cid`` as the rebase renumbered it: an id this commit issued moves up by
        `capsule_shift`; any other id stays (`moved_ids`, one id)."""
        number = capsule_number(cid) if self.capsule_shift else None
        if number is not None and number > int(self.snapshot.counter("capsules")):
            return capsule_id(number + self.capsule_shift)
        return cid

    def relabel(self, result: Any, generation: int) -> Any:
        """``result`` for the generation the commit landed at (a rebase moves it)."""
        if self._relabel is None or generation == self.snapshot.generation + 1:
            return result
        return self._relabel(result, generation)

    @property
    def compaction(self) -> bool:
        """Whether this commit only merges partitions (no row added, changed or erased):
        mirrored to Delta as ``OPTIMIZE`` with ``dataChange: false``. Decided from what
        it staged, never from the operation name its caller chose."""
        return (bool(self.rewrites) and not self.frames and not self.flushed
                and not self._journal and not self.erases and not self.derived
                and all(key in self._merges for key in self.rewrites))

    # -- finishing ------------------------------------------------------------------------
    def chain_journal(self, rows_per_part: int) -> Iterator[pl.DataFrame]:
        """Chain the staged journal rows onto the store's chain (reference 4.14).

        Yields them ``rows_per_part`` at a time, each piece as soon as its links are
        computed (with its ``seq``, not yet validated: `schema.validate_frame`), so a large
        commit writes one piece while it chains the next. The canonical lines are built
        in Polars (the same encoder the digest's verifier uses); only the sha256 chain
        itself runs row by row.
        """
        if not self._journal:
            return
        audit_seq, prev = getattr(
            self, "_chain_tail",
            (int(self.snapshot.counter("audit_seq")), str(self.snapshot.counter("chain", ""))),
        )
        chunks: list[pl.DataFrame] = []
        rows: list[tuple[Any, ...]] = []
        for item in [*self._journal, None]:
            if isinstance(item, tuple):
                rows.append(item)
                continue
            if rows:
                chunks.append(pl.DataFrame(rows, schema=_JOURNAL_STAGED, orient="row"))
                rows = []
            if item is not None:
                chunks.append(item)
        self._journal = []
        staged_rows = pl.concat(chunks, how="vertical") if len(chunks) > 1 else chunks[0]
        n = staged_rows.height
        frame = staged_rows.select(
            self._take_seq(n),
            pl.int_range(audit_seq + 1, audit_seq + n + 1, dtype=pl.Int64).alias("audit_seq"),
            "at",
            pl.lit(self.actor, dtype=pl.String).alias("actor"),
            "action", "subject", "reason",
        )
        del staged_rows
        for offset in range(0, n, max(1, rows_per_part)):
            piece = frame.slice(offset, rows_per_part)
            # a piece's lines at a time: every line of a large commit at once would hold
            # a few hundred bytes per journal row until the last link
            hashes = chain_hashes(prev, journal_lines(piece))
            prev = hashes[-1]
            self._chain_tail = (audit_seq + offset + piece.height, prev)
            yield piece.with_columns(pl.Series("chained_hash", hashes, dtype=pl.String))

    def append_journal(self, frame: pl.DataFrame) -> None:
        """Append journal rows that already carry their audit_seq and chained_hash (imports).

        The rows must continue the store's chain: audit_seq picks up after the last one,
        and the chain tail becomes the last row's hash. Verbs' own journal rows of this
        commit (if any) are chained after them.
        """
        if self._journal:
            raise InvalidInputError("append imported journal rows before any verb of the commit")
        if frame.height == 0:
            return
        if not strictly_increasing(frame["audit_seq"]):
            # sorting rows already in strictly increasing order changes nothing, but
            # copies every column (an import's journal is read in seq order)
            frame = frame.sort("audit_seq")
        first = int(frame["audit_seq"][0])
        expected = int(getattr(self, "_chain_tail", (self.snapshot.counter("audit_seq"), ""))[0]) + 1
        if first != expected:
            raise InvalidInputError(
                f"imported journal starts at audit_seq {first}; this store's journal continues "
                f"at {expected}"
            )
        staged = self.append("journal", frame)
        self._chain_tail = (int(staged["audit_seq"][-1]), str(staged["chained_hash"][-1]))

    def counters(self) -> dict[str, Any]:
        audit_seq, chain = getattr(
            self, "_chain_tail",
            (int(self.snapshot.counter("audit_seq")), str(self.snapshot.counter("chain", ""))),
        )
        return {"seq": self.seq, "capsules": self.capsules, "sessions": self.sessions,
                "audit_seq": audit_seq, "chain": chain}

    # -- state lookups that see this commit's own rows -------------------------------------
    def capsule_exists(self, capsule_id: str) -> bool:
        n = capsule_number(capsule_id)
        return n is not None and 1 <= n <= self.capsules

    def forget_mode(self, capsule_id: str) -> str | None:
        return self._new_forgets.get(capsule_id) or self.indexes.forget_mode(capsule_id)

    def require_capsule(self, capsule_id: str, *, live: bool = True, what: str = "capsule") -> None:
        if not self.capsule_exists(capsule_id):
            raise UnknownCapsuleError(
                f"{what} {capsule_id!r:.80} is not in this store (ids run cap-1..cap-{self.capsules}); "
                f"ingest it first or check the id"
            )
        if live and self.forget_mode(capsule_id) is not None:
            raise UnknownCapsuleError(
                f"{what} {capsule_id!r:.80} was forgotten ({self.forget_mode(capsule_id)}); "
                f"a forgotten capsule takes no new facts"
            )

    def relation_exists(self, kind: str, from_id: str, to_id: str) -> bool:
        key = (kind, from_id, to_id)
        return key in self._new_relations or self.indexes.relation_exists(key)

    def existing_ids_for_hashes(self, hashes: pl.Series) -> pl.Series:
        """The capsule id already holding each content hash (this commit's included), or null."""
        found = self._indexes.capsules_for_hashes(hashes)
        if found.null_count() < found.len():
            self._read_stored = True  # a stored capsule answers: its state decides
        if not self._new_hashes:
            return found
        mine = pl.concat(self._new_hashes, how="vertical")
        return hashes.to_frame("h").join(mine, on="h", how="left", maintain_order="left").select(
            pl.coalesce(pl.Series("found", found), "id"))["found"]

    def note_hashes(self, hashes: pl.Series, ids: pl.Series) -> None:
        """Remember this commit's new contents, so a later ingest in it finds them."""
        self._new_hashes.append(pl.DataFrame({"h": hashes, "id": ids}))

    def session(self, sid: str) -> list[Any] | None:
        if sid in self._new_sessions:
            return self._new_sessions[sid]
        state = self.indexes.session(sid)
        return None if state is None else list(state)

    def is_absorbed(self, capsule_id: str) -> bool:
        return capsule_id in self._new_processing or self.indexes.is_absorbed(capsule_id)


# ---- verbs ---------------------------------------------------------------------------------

def _to_frame(rows: Any) -> pl.DataFrame:
    if isinstance(rows, pl.LazyFrame):
        rows = rows.collect()
    if isinstance(rows, pl.DataFrame):
        return rows
    if isinstance(rows, Mapping):
        rows = [rows]
    if not isinstance(rows, list | tuple) or not all(isinstance(r, Mapping) for r in rows):
        raise InvalidInputError(
            "ingest takes a dict, a list of dicts or a polars DataFrame of capsule rows; "
            f"got {type(rows).__name__}"
        )
    if not rows:
        return pl.DataFrame()
    if any(not r for r in rows):
        i = next(i for i, r in enumerate(rows) if not r)
        raise InvalidInputError(
            f"capsule row {i} is empty; every capsule needs content, source and anchor"
        )
    unknown = sorted({k for r in rows for k in r} - set(INGEST_COLUMNS))
    if unknown:
        raise InvalidInputError(
            f"unknown capsule field(s) {', '.join(unknown)}; allowed: {', '.join(INGEST_COLUMNS)}"
        )
    columns: dict[str, list[Any]] = {k: [r.get(k) for r in rows] for k in
                                     {k for r in rows for k in r}}
    try:
        return pl.DataFrame(columns, strict=False)
    except (TypeError, pl.exceptions.PolarsError) as exc:
        raise InvalidInputError(f"capsule rows could not be read as columns: {exc}") from None


def _time_column(frame: pl.DataFrame, name: str) -> pl.Series:
    return instants_ns(frame[name], name)


def _blank(name: str) -> pl.Expr:
    return pl.col(name).cast(pl.String).fill_null("").str.strip_chars() == ""


def _first_bad(mask: pl.Series) -> int:
    return int(mask.arg_true()[0])


def ingest(c: Commit, rows: Any) -> list[str]:
    """Capsules in, ids out (existing ids for content already stored)."""
    frame = _to_frame(rows)
    if frame.height == 0:
        return []
    unknown = sorted(set(frame.columns) - set(INGEST_COLUMNS))
    if unknown:
        raise InvalidInputError(
            f"unknown capsule column(s) {', '.join(unknown)}; allowed: {', '.join(INGEST_COLUMNS)}"
        )
    missing = [k for k in ("content", "source", "anchor") if k not in frame.columns]
    if missing:
        raise InvalidInputError(
            f"capsule rows lack mandatory field(s) {', '.join(missing)}: every capsule needs "
            f"its content and its provenance (source and anchor)"
        )
    for name in _STRING_COLUMNS:
        if name in frame.columns and frame[name].dtype not in (pl.String, pl.Null):
            raise InvalidInputError(
                f"column {name} has dtype {frame[name].dtype}; it must hold strings"
            )
    n = frame.height
    # the three checked in one Polars call (a single-row ingest's checks were most of its
    # staging: each call costs tens of microseconds whatever the rows); the row is found
    # only for the error
    mandatory = ("content", "source", "anchor")
    blank_any = frame.select(_blank(name).any() for name in mandatory).row(0)
    for name, any_blank in zip(mandatory, blank_any, strict=True):
        if any_blank:
            row = _first_bad(frame.select(_blank(name)).to_series())
            missing_here = [k for k in mandatory
                            if (frame[k].cast(pl.String).fill_null("")[row].strip() == "")]
            raise InvalidInputError(
                f"capsule row {row} lacks {', '.join(missing_here)}: content, source and anchor "
                f"are mandatory and must not be blank"
            )
    # a column the caller left out takes its default, which passes its check: only the
    # columns given are checked
    supplied = set(frame.columns)
    created = _time_column(frame, "created_at") if "created_at" in supplied else None
    if created is None:
        created = constant(c.now, n, S.TIMESTAMP)
    else:
        created = pl.select(
            pl.lit(created).fill_null(pl.lit(c.now, dtype=S.TIMESTAMP))
        ).to_series()
    valid_from = _time_column(frame, "valid_from").fill_null(created) if "valid_from" in frame.columns else created
    valid_to = (_time_column(frame, "valid_to") if "valid_to" in frame.columns
                else constant(None, n, S.TIMESTAMP))

    def text(name: str, default: str | None) -> pl.Series:
        if name not in frame.columns:
            return constant(default, n, pl.String)
        col = frame[name].cast(pl.String)
        return col.fill_null(default) if default is not None else col

    project = text("project_id", DEFAULT_PROJECT)
    if "project_id" in supplied and (blank := project.str.strip_chars() == "").any():
        raise InvalidInputError(
            f"capsule row {_first_bad(blank)} has a blank project_id; omit it for "
            f"{DEFAULT_PROJECT!r} or name a project such as 'team/api'"
        )
    authority = text("authority_class", DEFAULT_AUTHORITY)
    if "authority_class" in supplied and (bad := ~authority.is_in(S.AUTHORITY_CLASSES)).any():
        raise _vocab_error("authority_class", authority[_first_bad(bad)], S.AUTHORITY_CLASSES)
    kind = text("kind", None)
    if "kind" in supplied and (
            bad := kind.is_not_null() & ~kind.is_in(S.CLASSIFICATION_KINDS)).any():
        raise _vocab_error("kind", kind[_first_bad(bad)], S.CLASSIFICATION_KINDS)
    if "confidence" in frame.columns:
        if not frame["confidence"].dtype.is_numeric() and frame["confidence"].dtype != pl.Null:
            raise InvalidInputError(
                f"confidence has dtype {frame['confidence'].dtype}; give a number in 0..1"
            )
        confidence = frame["confidence"].cast(pl.Float64).fill_null(DEFAULT_CONFIDENCE)
        bad = ~confidence.is_between(0.0, 1.0) | confidence.is_nan()
        if bad.any():
            raise InvalidInputError(
                f"capsule row {_first_bad(bad)} has confidence {confidence[_first_bad(bad)]}; "
                f"confidence must be in 0..1 (default {DEFAULT_CONFIDENCE})"
            )
    else:
        confidence = constant(DEFAULT_CONFIDENCE, n, pl.Float64)
    if "valid_to" in supplied and (bad := valid_to.is_not_null() & (valid_to < valid_from)).any():
        raise InvalidInputError(
            f"capsule row {_first_bad(bad)} has valid_to before valid_from; a capsule cannot "
            f"expire before it becomes valid"
        )
    sidecars = _ingest_sidecars(frame)
    if "instruction_taint" in frame.columns:
        if frame["instruction_taint"].dtype not in (pl.Boolean, pl.Null):
            raise InvalidInputError(
                f"instruction_taint has dtype {frame['instruction_taint'].dtype}; give booleans"
            )
        taint = frame["instruction_taint"].fill_null(False)
    else:
        taint = constant(False, n, pl.Boolean)

    content = frame["content"].cast(pl.String)
    hashes = sha256_hex(content).rename("h")
    existing = c.existing_ids_for_hashes(hashes)
    known = existing.is_not_null()
    if known.any():
        for i in known.arg_true().to_list():
            cid = existing[i]
            mode = c.forget_mode(cid)
            if mode is not None:
                raise TombstonedContentError(
                    f"capsule row {i} has the content of {cid}, which was forgotten ({mode}); "
                    f"forget is sticky: a forgotten memory cannot come back, nor be answered "
                    f"with its dead id. Nothing was written. Store different text (the store "
                    f"keeps the forgotten capsule's content hash to recognise it)",
                    capsule_id=cid, row=i,
                )

    # within one call, the first occurrence of a content wins; the new ones take the next
    # numbers in row order and later duplicates answer the first one's id
    start = c.capsules + 1
    fresh = existing.is_null()
    # the common bulk case, no content twice in the call, is told by 60 bits of each hash
    # (distinct prefixes mean distinct hashes; a shared one takes the exact path below)
    prefixes = hashes.str.slice(0, 15).str.to_integer(base=16)
    if prefixes.n_unique() == hashes.len():
        assigned = pl.DataFrame({"existing": existing, "new": fresh}).with_columns(
            pl.when("new").then(pl.col("new").cast(pl.Int64).cum_sum() + (start - 1)).alias("num"))
    else:
        assigned = pl.DataFrame({"h": hashes, "existing": existing, "new": fresh}).with_columns(
            pl.col("new") & pl.col("h").is_first_distinct()
        ).with_columns(
            pl.when("new").then(pl.col("new").cast(pl.Int64).cum_sum() + (start - 1)).alias("num")
        ).with_columns(pl.col("num").max().over("h"))
    take = assigned["new"].arg_true()
    n_new = take.len()
    ids = assigned.select(
        pl.coalesce("existing", pl.format("cap-{}", pl.col("num"))).alias("id"))["id"]
    if not n_new:
        _write_sidecars(c, sidecars, ids)
        return ids.to_list()
    c.capsules += n_new
    new_ids = ids.gather(take)
    new_hashes = hashes.gather(take)
    capsules = pl.DataFrame(
        {
            "id": new_ids,
            "created_at": created.gather(take),
            "project_id": project.gather(take),
            "content": content.gather(take),
            "content_chars": content.gather(take).str.len_chars().cast(pl.Int64),
            "source": frame["source"].cast(pl.String).gather(take),
            "anchor": frame["anchor"].cast(pl.String).gather(take),
            "source_hash": new_hashes,
            "confidence": confidence.gather(take),
            "valid_from": valid_from.gather(take),
            "valid_to": valid_to.gather(take),
            "authority_class": authority.gather(take),
            "instruction_taint": taint.gather(take),
            "conversation_id": text("conversation_id", None).gather(take),
            "author": text("author", None).gather(take),
        }
    )
    c.append("capsules", capsules)
    c.note_hashes(new_hashes, new_ids)
    c.journal_many("memory_ingest", new_ids)
    if "kind" in supplied and (  # else none given: no classification row, no call
            classified := (kinds := kind.gather(take)).is_not_null()).any():
        cids = new_ids.filter(classified)
        given = kinds.filter(classified)
        append_events(c, "classifications", pl.DataFrame({"capsule_id": cids, "kind": given}),
                      operation=None)
    _write_sidecars(c, sidecars, ids)
    c.operations.append("ingest")
    return ids.to_list()


def _ingest_sidecars(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """The event times and epistemics that ingest rows carry, checked before anything is
    written (rows without them give none); the capsule ids are filled in later."""
    out: dict[str, pl.DataFrame] = {}
    n = frame.height
    times = [name for name in _EVENT_COLUMNS if name in frame.columns]
    if times:
        cols = {name: (_time_column(frame, name) if name in frame.columns
                       else constant(None, n, S.TIMESTAMP)).alias(name) for name in _EVENT_COLUMNS}
        rows = pl.DataFrame(cols).with_row_index("_row")
        rows = rows.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in _EVENT_COLUMNS))
        _check_rows("capsule", rows, _check_event_times)
        out["event_times"] = rows
    facts = [name for name in _EPISTEMIC_COLUMNS if name in frame.columns]
    if facts:
        cols = {name: (frame[name].cast(pl.String) if name in frame.columns
                       else constant(None, n, pl.String)).alias(name)
                for name in _EPISTEMIC_COLUMNS}
        rows = pl.DataFrame(cols).with_row_index("_row")
        rows = rows.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in _EPISTEMIC_COLUMNS))
        for name in ("proof_hint", "stale_if"):
            blank = rows[name].str.strip_chars() == ""
            if blank.any():
                raise InvalidInputError(f"capsule row {rows['_row'][_first_bad(blank)]}: {name} "
                                        f"is blank; give text or leave it out")
        _check_rows("capsule", rows, _check_epistemics)
        out["epistemics"] = rows
    return out


def _check_rows(what: str, rows: pl.DataFrame, check: Callable[[pl.DataFrame], None]) -> None:
    """Run a table's check on ingest rows, naming the ingest row in the error."""
    try:
        check(rows)
    except InvalidInputError as exc:
        text = str(exc)
        for i, row in enumerate(rows["_row"].to_list()):
            for table in ("event_times", "epistemics"):
                text = text.replace(f"{table} row {i} ", f"{what} row {row} ")
        raise InvalidInputError(text) from None


def _write_sidecars(c: Commit, sidecars: dict[str, pl.DataFrame], ids: pl.Series) -> None:
    """Stage the ingest rows' event times and epistemics for their capsules (new or
    already stored: the engine annotates a deduplicated capsule too)."""
    for table, rows in sidecars.items():
        if rows.height:
            cids = ids.gather(rows["_row"]).alias("capsule_id")
            append_events(c, table, rows.drop("_row").with_columns(cids), operation=None)


def relate(c: Commit, from_id: str, to_id: str, kind: str, *, origin: str = "manual") -> bool:
    """Record an edge; False (and nothing written) when the edge already exists."""
    if kind not in S.RELATION_KINDS:
        raise _vocab_error("relation kind", kind, S.RELATION_KINDS)
    if origin not in S.RELATION_ORIGINS:
        raise _vocab_error("relation origin", origin, S.RELATION_ORIGINS)
    if from_id == to_id:
        raise InvalidInputError(f"a {kind} edge from {from_id!r} to itself says nothing; name two capsules")
    # falsifies may come from an outcome (out-<n>), which the store does not hold
    if not (kind == "falsifies" and isinstance(from_id, str) and from_id.startswith("out-")):
        c.require_capsule(from_id, live=False, what="relation endpoint")
    c.require_capsule(to_id, live=False, what="relation endpoint")
    if kind in S.LIVE_TARGET_KINDS:
        _refuse_forgotten_topic(kind, to_id, c.forget_mode(to_id), "")
    return append_events(c, "relations", _one_row(kind=kind, from_id=from_id, to_id=to_id,
                                                   origin=origin), operation="relate") == 1


def _refuse_forgotten_topic(kind: str, to_id: str, mode: str | None, where: str) -> None:
    if mode is not None:
        raise UnknownCapsuleError(
            f"{where}an {kind} edge names what a capsule is about, and {to_id!r:.80} was "
            f"forgotten ({mode}): a forgotten capsule is no topic. Point the edge at a live "
            f"capsule (ingest the topic again if it still matters); edges recorded before "
            f"the forget are kept"
        )


def forget(c: Commit, capsule_id: str, mode: str = "tombstone", reason: str | None = None) -> bool:
    """Tombstone a capsule; redact/purge also erase its content bytes from the data files."""
    if mode not in S.FORGET_MODES:
        raise _vocab_error("forget mode", mode, S.FORGET_MODES)
    if reason is not None and not isinstance(reason, str):
        raise InvalidInputError(f"a forget reason is text or None; got {type(reason).__name__} "
                                f"{reason!r}")
    c.require_capsule(capsule_id, live=False)
    # False when already forgotten at least this thoroughly
    return append_events(c, "forgets", _one_row(capsule_id=capsule_id, mode=mode,
                                                 reason=reason), operation="forget") == 1


def _erase_content(c: Commit, capsule_id: str) -> None:
    """Null the content of one capsule in the partition that holds it (rewritten)."""
    c.erases = True
    number = capsule_number(capsule_id)
    assert number is not None
    # derived text read from content (headlines, labels) goes with the content: the
    # store drops the erased numbers' rows of every text table when the commit lands
    c.erased.add(number)
    staged = c.frames.get("capsules", [])
    for i, frame in enumerate(staged):
        if capsule_id in frame["id"]:
            staged[i] = frame.with_columns(
                pl.when(pl.col("id") == capsule_id).then(None).otherwise(pl.col("content"))
                .alias("content")
            )
            return
    if "capsules" in c.flushed_tables and number > int(c.snapshot.counter("capsules")):
        raise InvalidInputError(f"{capsule_id} was written out by this commit already "
                                f"(flush); erase it in a later commit")
    part = c.indexes.capsule_part(c.snapshot, number)
    key = part.path
    c._merges.discard(key)
    if key in c.rewrites:
        frame = c.rewrites[key][2]
    else:
        frame = c._read_part(part)
    frame = frame.with_columns(
        pl.when(pl.col("id") == capsule_id).then(None).otherwise(pl.col("content")).alias("content")
    )
    c.rewrites[key] = ([part], "capsules", frame)


def _id_list(value: Any, verb: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        raise InvalidInputError(
            f"{verb} takes a capsule id or a list of them (e.g. ['cap-1', 'cap-2']); "
            f"got {type(value).__name__} {value!r:.60}"
        )
    return list(value)


def record_recall(c: Commit, capsule_ids: Sequence[str] | str, *,
                  terms: Sequence[str] | str | None = None, project_prefix: str | None = None,
                  session_id: str | None = None) -> int:
    # usage is about the record: a capsule forgotten between retrieval and usage still
    # takes it, so the batch's other ids never lose theirs (as nMEMORY records it)
    ids = _id_list(capsule_ids, "record_recall")
    if terms is None and (project_prefix is not None or session_id is not None):
        raise InvalidInputError("record_recall: project_prefix and session_id describe a "
                                "receipt, which needs the recall's terms (terms=[...])")
    counts: dict[str, int] = {}
    for cid in ids:
        c.require_capsule(cid, live=False)
        counts[cid] = counts.get(cid, 0) + 1
    written = 0
    if counts:
        written = append_events(c, "recalls", pl.DataFrame(
            {"capsule_id": list(counts), "count": list(counts.values())},
            schema={"capsule_id": pl.String, "count": pl.Int64}), operation=None)
    if terms is not None:
        _record_receipt(c, ids, terms, project_prefix, session_id)
    c.operations.append("record_recall")
    return written


def _record_receipt(c: Commit, ids: list[str], terms: Sequence[str] | str,
                    project_prefix: str | None, session_id: str | None) -> None:
    """One receipt for one recall: the caller's terms verbatim, the ids in the order
    returned, the prefix and session it ran under (the session's project as the receipt's)."""
    raw = [terms] if isinstance(terms, str) else terms
    if not isinstance(raw, Sequence) or not all(isinstance(t, str) for t in raw):
        raise InvalidInputError(f"record_recall: terms is a string or a list of strings; got "
                                f"{terms!r:.60}")
    if project_prefix is not None and not isinstance(project_prefix, str):
        raise InvalidInputError(f"record_recall: project_prefix is text or None; got "
                                f"{project_prefix!r:.60}")
    project = None
    if session_id is not None:
        if not isinstance(session_id, str) or session_number(session_id) is None:
            raise InvalidInputError(f"record_recall: session_id {session_id!r:.60} is not a "
                                    f"session id; {SESSION_ID_RULE}")
        state = c.session(session_id)
        if state is None:
            raise InvalidInputError(f"record_recall: session {session_id!r} was never started "
                                    f"in this store")
        project = state[0]
    append_events(c, "recall_receipts", pl.DataFrame(
        {"terms": [list(raw)], "returned_ids": [ids], "project_id": [project],
         "project_prefix": [project_prefix], "session_id": [session_id]},
        schema={"terms": pl.List(pl.String), "returned_ids": pl.List(pl.String),
                "project_id": pl.String, "project_prefix": pl.String,
                "session_id": pl.String}), operation=None)


def record_miss(c: Commit, terms: Sequence[str] | str, outcome: str) -> list[str]:
    if outcome not in S.MISS_OUTCOMES:
        raise _vocab_error("miss outcome", outcome, S.MISS_OUTCOMES)
    if not isinstance(terms, str | Sequence):
        raise InvalidInputError(f"record_miss takes a term or a list of terms; got {terms!r:.60}")
    raw = [terms] if isinstance(terms, str) else list(terms)
    bad = [t for t in raw if not isinstance(t, str)]
    if bad:
        raise InvalidInputError(f"miss terms must be strings; got {bad[0]!r}")
    folded = fold_terms(raw)
    if folded:
        append_events(c, "recall_misses", pl.DataFrame(
            {"term": folded, "outcome": [outcome] * len(folded)},
            schema={"term": pl.String, "outcome": pl.String}), operation="record_miss")
    return folded


def record_lane_override(c: Commit, forced: str, auto_pick: str) -> None:
    if (forced, auto_pick) not in S.LANE_PAIRS:
        allowed = ", ".join(f"({f}, {a})" for f, a in S.LANE_PAIRS)
        raise InvalidInputError(
            f"lane pair ({forced}, {auto_pick}) is not an override the router records; "
            f"allowed (forced, auto_pick): {allowed}"
        )
    append_events(c, "lane_overrides", _one_row(forced=forced, auto_pick=auto_pick),
                  operation="record_lane_override")


def classify(c: Commit, capsule_id: str, kind: str | None = None, tier: str | None = None,
             scope: str = "project") -> None:
    if kind is None and tier is None:
        raise InvalidInputError("classify needs a kind, a tier, or both")
    if kind is not None and kind not in S.CLASSIFICATION_KINDS:
        raise _vocab_error("kind", kind, S.CLASSIFICATION_KINDS)
    if tier is not None and tier not in S.TIERS:
        raise _vocab_error("tier", tier, S.TIERS)
    if scope not in S.CLASSIFICATION_SCOPES:
        raise _vocab_error("classification scope", scope, S.CLASSIFICATION_SCOPES)
    c.require_capsule(capsule_id, live=False)  # "the label is about the record"
    if kind is not None:
        append_events(c, "classifications",
                      _one_row(capsule_id=capsule_id, kind=kind, scope=scope), operation=None)
    if tier is not None:
        append_events(c, "tiers", _one_row(capsule_id=capsule_id, tier=tier), operation=None)
    c.operations.append("classify")


def session_start(c: Commit, project: str = DEFAULT_PROJECT, session_id: str | None = None) -> str:
    if not isinstance(project, str) or not project.strip():
        raise InvalidInputError("session_start needs a non-blank project id, e.g. 'team/api'")
    if session_id is None:
        c.sessions += 1
        while c.session(f"sess-{c.sessions}") is not None:  # taken by an explicit id
            c.sessions += 1
        sid = f"sess-{c.sessions}"
    else:
        if session_number(session_id) is None:
            raise InvalidInputError(f"{SESSION_ID_RULE}; got {session_id!r}: pass such an "
                                    f"id, or omit session_id to take the next one")
        if c.session(session_id) is not None:
            raise SessionError(f"session {session_id} already exists; start a new one without an id")
        sid = session_id
        c.sessions += 1
    c.append("brackets", pl.DataFrame({"at": c._now_frame(1), "session_id": [sid],
                                       "event": ["start"], "project_id": [project],
                                       "summary": pl.Series([None], dtype=pl.String)}))
    c._new_sessions[sid] = [project, False]
    c.journal("memory_session_start", sid, None)
    c.operations.append("session_start")
    return sid


def session_finish(c: Commit, sid: str, handoff: str | None = None) -> str | None:
    if session_number(sid) is None:
        raise InvalidInputError(f"{SESSION_ID_RULE}; got {sid!r}: pass the id "
                                f"session_start returned")
    state = c.session(sid)
    if state is None:
        raise SessionError(f"session {sid!r} was never started; start one with session_start(project)")
    project, finished = state
    if finished:
        raise SessionError(f"session {sid} is already finished; a session finishes once")
    handoff_id = None
    if handoff is not None:
        if not isinstance(handoff, str) or not handoff.strip():
            raise InvalidInputError(
                "the handoff is blank; pass the text the next session should read, or omit it "
                "(the session stays open)"
            )
        (handoff_id,) = ingest(c, {"content": handoff, "source": SESSION_FINISH_SOURCE,
                                   "anchor": sid, "project_id": project})
    c.append("brackets", pl.DataFrame({"at": c._now_frame(1), "session_id": [sid],
                                       "event": ["finish"], "project_id": [project],
                                       "summary": pl.Series([None], dtype=pl.String)}))
    c._new_sessions[sid] = [project, True]
    c.journal("memory_session_finish", sid, handoff_id)
    c.operations.append("session_finish")
    return handoff_id


def record_git_scan(c: Commit, source_key: str, cursor: str,
                    corroborations: Iterable[Mapping[str, Any]] = ()) -> int:
    if not isinstance(source_key, str) or ":" not in source_key:
        raise InvalidInputError(f"source keys look like 'git:<repo path>'; got {source_key!r}")
    source = source_key.split(":", 1)[0]
    if source not in S.CORROBORATION_SOURCES:
        raise _vocab_error("source", source, S.CORROBORATION_SOURCES)
    if not isinstance(cursor, str) or not cursor:
        raise InvalidInputError("the scan cursor (the head sha) must be a non-empty string")
    if isinstance(corroborations, str | bytes | Mapping):
        raise InvalidInputError("corroborations is a list of dicts (capsule_id, kind, ref, verdict)")
    rows = []
    for i, r in enumerate(corroborations):
        if not isinstance(r, Mapping):
            raise InvalidInputError(
                f"corroboration {i} is {type(r).__name__} {r!r:.40}; each is a dict with "
                f"capsule_id, kind, ref, verdict (and optional detail)"
            )
        rows.append(dict(r))
    allowed = {"capsule_id", "kind", "ref", "verdict", "detail"}
    for i, r in enumerate(rows):
        extra = set(r) - allowed
        lacking = {"capsule_id", "kind", "ref", "verdict"} - set(r)
        if extra or lacking:
            raise InvalidInputError(
                f"corroboration {i}: fields {sorted(lacking)} missing / {sorted(extra)} unknown; "
                f"each row has capsule_id, kind, ref, verdict (and optional detail)"
            )
        if r["kind"] not in S.CORROBORATION_KINDS:
            raise _vocab_error("corroboration kind", r["kind"], S.CORROBORATION_KINDS)
        if r["verdict"] not in S.CORROBORATION_VERDICTS:
            raise _vocab_error("corroboration verdict", r["verdict"], S.CORROBORATION_VERDICTS)
        c.require_capsule(r["capsule_id"], live=False)
    if rows:
        append_events(c, "corroborations", pl.DataFrame({
            "capsule_id": [r["capsule_id"] for r in rows],
            "source": [source] * len(rows),
            "kind": [r["kind"] for r in rows],
            "ref": [str(r["ref"]) for r in rows],
            "verdict": [r["verdict"] for r in rows],
            "detail": [r.get("detail") for r in rows],
        }, schema={"capsule_id": pl.String, "source": pl.String, "kind": pl.String,
                   "ref": pl.String, "verdict": pl.String, "detail": pl.String}), operation=None)
    append_events(c, "source_cursors", _one_row(source_key=source_key, cursor=cursor),
                  operation=None)
    c.journal("memory_git_scan", source_key, cursor)
    c.operations.append("record_git_scan")
    return len(rows)


def record_summary(c: Commit, conversation_id: str, summary: str) -> None:
    """Land a summary the language seam returned (the engine never writes prose itself)."""
    if not isinstance(summary, str) or not summary.strip():
        raise InvalidInputError(f"the summary for {conversation_id!r} is blank; return text or None")
    append_events(c, "summaries", _one_row(conversation_id=conversation_id, summary=summary),
                  operation="summarize")


def absorb(c: Commit, member_ids: Sequence[str], into_id: str) -> None:
    """Mark members absorbed by a rollup: processing rows and abstracted_into edges."""
    c.append("processing", pl.DataFrame({
        "at": c._now_frame(len(member_ids)), "capsule_id": list(member_ids),
        "abstracted_into_memory_id": [into_id] * len(member_ids)}))
    c._new_processing.update(member_ids)
    for mid in member_ids:
        relate(c, mid, into_id, "abstracted_into")


# ---- bulk: the verbs' vectorised form ------------------------------------------------------

ERASING_MODES = ("redact", "purge")
#: a capsule's forget mode (None: not forgotten) -> its level; erasing beats tombstoning
_FORGET_LEVEL: dict[str | None, int] = {None: -1, "tombstone": 0, "redact": 1, "purge": 1}

# the tables `Store.append` takes; each one's rules are declared in schema.RULES
BULK_TABLES = tuple(S.RULES)
MAX_RECALL_COUNT = S.MAX_RECALL_COUNT


def _one_row(**values: str | None) -> pl.DataFrame:
    """A verb's one row of text columns for `append_events` (nothing coerced)."""
    for name, value in values.items():
        if value is not None and not isinstance(value, str):
            raise InvalidInputError(f"{name} must be text; got {type(value).__name__} "
                                    f"{value!r:.60}")
    return pl.DataFrame({k: [v] for k, v in values.items()},
                        schema={k: pl.String for k in values})


def bulk_frame(table: str, rows: Any) -> pl.DataFrame:
    """Rows given to `Store.append` / ``writer.append_rows`` as one frame: a DataFrame (or
    LazyFrame), a dict of columns (one list per column) or a list of row dicts.

    Examples:
        >>> bulk_frame("recalls", {"capsule_id": ["cap-1", "cap-2"]}).height
        2
    """
    if isinstance(rows, pl.LazyFrame):
        rows = rows.collect()
    if isinstance(rows, pl.DataFrame):
        return rows
    try:
        if isinstance(rows, Mapping):
            if not all(isinstance(v, list | tuple | pl.Series) for v in rows.values()):
                raise InvalidInputError(
                    f"append({table!r}, ...): a dict gives columns, one list per column (e.g. "
                    f"{{'capsule_id': ['cap-1', 'cap-2']}}); got a value that is not a list"
                )
            lengths = {str(k): len(v) for k, v in rows.items()}
            if len(set(lengths.values())) > 1:
                raise InvalidInputError(
                    f"append({table!r}, ...): columns have different lengths "
                    f"({', '.join(f'{k}={n}' for k, n in lengths.items())}); give one value "
                    f"per row in every column"
                )
            return pl.DataFrame({k: list(v) for k, v in rows.items()}, strict=False)
        if isinstance(rows, list | tuple) and all(isinstance(r, Mapping) for r in rows):
            return pl.DataFrame([dict(r) for r in rows], strict=False) if rows else pl.DataFrame()
    except (TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        if isinstance(exc, InvalidInputError):
            raise
        raise InvalidInputError(f"append({table!r}, ...): rows could not be read as "
                                f"columns: {exc}") from None
    raise InvalidInputError(
        f"append({table!r}, ...) takes a polars DataFrame, a dict of columns or a list of row "
        f"dicts; got {type(rows).__name__}"
    )


def append_events(c: Commit, table: str, rows: Any, *, operation: str | None = "") -> int:
    """Append many event rows of one table at once: the one path every event verb takes.

    A verb checks its own arguments (for its own error messages) and stages its row
    here; `Store.append` stages many. ``operation`` names the verb in the generation's
    list (default ``append:<table>``; None records nothing, for a verb that names itself).

    Rows get ``seq`` here and ``at`` from the clock unless they carry their own. Capsule
    references must exist; relation edges already stored (or repeated) are skipped;
    audited tables get one journal row per row written; erasing forgets rewrite the
    partitions holding the content. Returns the number of rows written.
    """
    if table not in BULK_TABLES:
        raise InvalidInputError(
            f"bulk append takes one of {', '.join(BULK_TABLES)}; capsules go through ingest, "
            f"sessions through session_start/session_finish"
        )
    frame = bulk_frame(table, rows)
    if frame.height == 0:
        return 0
    schema = S.table_schema(table)
    allowed = [name for name in schema.names() if name != "seq"]
    unknown = sorted(set(frame.columns) - set(allowed))
    if unknown:
        raise InvalidInputError(f"{table}: unknown column(s) {', '.join(unknown)}; "
                                f"allowed: {', '.join(allowed)}")
    rules = S.RULES[table]
    defaults = {"at": None, **rules.defaults}
    lacking = [n for n in allowed if n not in frame.columns and n not in defaults]
    if lacking:
        raise InvalidInputError(f"{table}: missing column(s) {', '.join(lacking)}")
    if "at" in frame.columns:  # a caller's instants are checked; the clock's are not
        frame = frame.with_columns(
            _time_column(frame, "at").fill_null(pl.lit(c.now, dtype=S.TIMESTAMP)).alias("at"))
    if table == "event_times":
        frame = frame.with_columns([_time_column(frame, n).alias(n) for n in _EVENT_COLUMNS
                                    if n in frame.columns])
    fill = []
    for name, value in defaults.items():
        if name not in frame.columns:
            value = c.now if name == "at" else c.actor if value is S.WRITER_ACTOR else value
            fill.append(pl.lit(value, dtype=schema[name]).alias(name))
    frame = frame.with_columns(fill) if fill else frame
    for name in allowed:
        if name == "at":
            continue
        have, want = frame[name].dtype, schema[name]
        fits = (have == want or have == pl.Null
                or (want == pl.List(pl.String) and have in (pl.List(pl.Null), pl.List(pl.String)))
                or (want == pl.Int64 and have.is_integer())
                or (want == pl.Float64 and have.is_numeric()))
        if not fits:
            raise InvalidInputError(
                f"{table}.{name} has dtype {have}; it holds {want} values: give "
                f"{'strings' if want == pl.String else want} (nothing is coerced, so 1.5 is "
                f"never truncated to 1 and 5 never becomes '5')"
            )
    try:
        frame = frame.with_columns(
            [pl.col(n).cast(schema[n]) for n in allowed if n != "at"]
        )
    except pl.exceptions.PolarsError as exc:
        raise InvalidInputError(f"{table}: a value does not fit its column: {exc}") from None
    for name in rules.nonblank:
        blank = frame[name].fill_null("").str.strip_chars() == ""
        if blank.any():
            raise InvalidInputError(f"{table} row {_first_bad(blank)}: {name} is blank; it "
                                    f"must hold text")
    for name in rules.optional_text:
        blank = frame[name].str.strip_chars() == ""
        if blank.any():
            raise InvalidInputError(f"{table} row {_first_bad(blank)}: {name} is blank; give "
                                    f"text or leave it out (null)")
    if table == "recalls":
        bad = ~frame["count"].is_between(1, MAX_RECALL_COUNT).fill_null(False)
        if bad.any():
            row = _first_bad(bad)
            raise InvalidInputError(
                f"recalls row {row}: count {frame['count'][row]} is outside 1..{MAX_RECALL_COUNT} "
                f"(a recall batch counts how often one capsule was returned; bounded so that "
                f"recall_count sums can never overflow)"
            )
    if table == "recall_receipts":
        frame = _receipt_rows(c, frame)
    if table == "event_times":
        _check_event_times(frame)
    if table == "epistemics":
        _check_epistemics(frame)
    if table == "recall_aliases":
        frame = _alias_rows(c, frame)
    if table == "relations":  # the verb's order: vocabulary, self edge, then the ids
        bad = ~frame["kind"].is_in(S.RELATION_KINDS)
        if bad.any():
            raise _vocab_error("relation kind", frame["kind"][_first_bad(bad)], S.RELATION_KINDS)
        self_loop = frame["from_id"] == frame["to_id"]
        if self_loop.any():
            raise InvalidInputError(f"relations row {_first_bad(self_loop)} is an edge to itself")
    for column in rules.capsule_refs:
        ids = frame[column]
        nums = pl.select(capsule_number_expr(pl.lit(ids))).to_series()
        ok = (nums.is_not_null() & (nums <= c.capsules)).fill_null(False)
        if table == "relations" and column == "from_id":
            ok = ok | ((frame["kind"] == "falsifies") & ids.str.starts_with("out-"))
        if not ok.all():
            row = _first_bad(~ok)
            raise UnknownCapsuleError(
                f"{table} row {row}: {column} {ids[row]!r:.80} is not in this store "
                f"(ids run cap-1..cap-{c.capsules})"
            )
    if table == "relations":
        topics = frame.with_row_index("_row").filter(pl.col("kind").is_in(S.LIVE_TARGET_KINDS))
        for row, kind, to_id in topics.select("_row", "kind", "to_id").iter_rows():
            _refuse_forgotten_topic(kind, to_id, c.forget_mode(to_id), f"relations row {row}: ")
    if not rules.accepts_tombstoned:
        for column in rules.capsule_refs:
            for i, cid in enumerate(frame[column].to_list()):
                if c.forget_mode(cid) is not None:
                    raise UnknownCapsuleError(f"{table} row {i}: {column} {cid!r:.80} was forgotten; "
                                              f"this table takes live capsules only")
    if table == "relations":
        frame = frame.unique(list(rules.dedupe), keep="first", maintain_order=True)
        stored = c.indexes.relations_exist(frame.select("kind", "from_id", "to_id"))
        if c._new_relations:
            stored = [s or key in c._new_relations for s, key in
                      zip(stored, frame.select("kind", "from_id", "to_id").iter_rows(), strict=True)]
        frame = frame.filter(~pl.Series(stored, dtype=pl.Boolean))
        c._new_relations.update(frame.select("kind", "from_id", "to_id").iter_rows())
    if table == "lane_overrides":
        pairs = pl.DataFrame(S.LANE_PAIRS, schema=["forced", "auto_pick"], orient="row")
        unpaired = frame.join(pairs, on=["forced", "auto_pick"], how="anti")
        if unpaired.height:
            raise InvalidInputError(f"lane pair ({unpaired['forced'][0]}, "
                                    f"{unpaired['auto_pick'][0]}) is "
                                    f"not an override the router records")
    if table == "recall_misses":
        folded = frame["term"].to_list()
        if [fold_terms([t]) for t in folded] != [[t] for t in folded]:
            raise InvalidInputError("recall_misses terms must be folded already "
                                    "(memframe.text.fold_term) and hold an alphanumeric")
    if table == "forgets":
        # as the verbs one after another: a row lands when it forgets more thoroughly (an
        # erasure over a tombstone) than what is stored and every earlier row of the batch
        # for its capsule, so the strongest mode of a batch always lands
        forgotten = frame["capsule_id"].unique().to_list()
        prior = pl.DataFrame({"capsule_id": forgotten,
                              "prior": [_FORGET_LEVEL.get(c.forget_mode(i), -1)
                                        for i in forgotten]},
                             schema={"capsule_id": pl.String, "prior": pl.Int8})
        level = pl.col("mode").is_in(ERASING_MODES).cast(pl.Int8)
        frame = frame.join(prior, on="capsule_id", how="left", maintain_order="left").filter(
            level > pl.max_horizontal(
                "prior", level.cum_max().shift(1).over("capsule_id").fill_null(-1))
        ).drop("prior")
    if frame.height == 0:
        return 0
    staged = c.append(table, frame.select(allowed))
    if table == "forgets":
        for cid, mode in staged.select("capsule_id", "mode").iter_rows():
            c._new_forgets[cid] = mode
            if mode in ("redact", "purge"):
                _erase_content(c, cid)
    if rules.journal is not None:  # from the rows as staged (a taught alias: as spelled)
        action, subject, reason = rules.journal
        audit = frame.select(
            (action if isinstance(action, pl.Expr) else pl.lit(action)).alias("action"),
            pl.col(subject).alias("subject"),
            (reason if reason is not None else pl.lit(None)).cast(pl.String).alias("reason"))
        c.journal_many(audit["action"], audit["subject"], audit["reason"])
    if operation is not None:
        c.operations.append(operation or f"append:{table}")
    return staged.height


# ---- recall receipts, event times, epistemics (nMEMORY 0.3.0, schema v21) -----------------

_EVENT_COLUMNS = ("event_at", "event_from", "event_to")
_EPISTEMIC_COLUMNS = ("evidence_state", "proof_hint", "stale_if")


def receipt_count(c: Commit) -> int:
    """Receipts the store holds at the commit's snapshot plus those it stages: the next
    receipt is ``rcpt-<count + 1>`` (receipts are never removed, so ids are never reused)."""
    return (sum(p.rows for p in c.snapshot.parts("recall_receipts"))
            + sum(f.height for f in c.frames.get("recall_receipts", []))
            + sum(int(add["rows"]) for _path, add in c.flushed
                  if add["table"] == "recall_receipts"))


def _receipt_rows(c: Commit, frame: pl.DataFrame) -> pl.DataFrame:
    """Check receipt rows and fill their ids and outcomes (the rules of `append_events`)."""
    n = frame.height
    for name in ("terms", "returned_ids"):
        if frame[name].null_count():
            raise InvalidInputError(f"recall_receipts row {_first_bad(frame[name].is_null())}: "
                                    f"{name} is missing; give a list (empty for no ids)")
    terms = frame["terms"]
    no_terms = terms.list.len() == 0
    if no_terms.any():
        raise InvalidInputError(f"recall_receipts row {_first_bad(no_terms)}: no terms; a "
                                f"receipt records the query text of the recall it answers")
    blank = terms.list.eval(pl.element().fill_null("").str.strip_chars() == "").list.any()
    if blank.any():
        raise InvalidInputError(f"recall_receipts row {_first_bad(blank)}: a term is blank; "
                                f"every term must hold text")
    returned = frame["returned_ids"]
    flat = returned.explode().drop_nulls()
    if returned.list.eval(pl.element().is_null()).list.any().any():
        raise InvalidInputError("recall_receipts: a returned id is null; list capsule ids")
    if flat.len():
        nums = pl.select(capsule_number_expr(pl.lit(flat))).to_series()
        ok = (nums.is_not_null() & (nums <= c.capsules)).fill_null(False)
        if not ok.all():
            bad = flat[_first_bad(~ok)]
            raise UnknownCapsuleError(f"recall_receipts: returned id {bad!r:.80} is not in this "
                                      f"store (ids run cap-1..cap-{c.capsules})")
    hit = returned.list.len() > 0
    frame = frame.with_columns(pl.col("outcome").fill_null(
        pl.when(pl.lit(hit)).then(pl.lit("grounded")).otherwise(pl.lit("abstain"))))
    outcome = frame["outcome"]
    bad = ~outcome.is_in(S.RECEIPT_OUTCOMES)
    if bad.any():
        raise _vocab_error("receipt outcome", outcome[_first_bad(bad)], S.RECEIPT_OUTCOMES)
    empty_ground = (outcome == "grounded") & ~hit
    if empty_ground.any():
        raise InvalidInputError(f"recall_receipts row {_first_bad(empty_ground)}: outcome "
                                f"grounded with no returned id; a grounded recall returns "
                                f"at least one capsule")
    lane = frame["lane"]
    bad = lane.is_not_null() & ~lane.is_in(S.RECALL_LANES)
    if bad.any():
        raise _vocab_error("recall lane", lane[_first_bad(bad)], S.RECALL_LANES)
    sid = frame["session_id"]
    bad = sid.is_not_null() & ~sid.str.contains(SESSION_PATTERN)
    if bad.any():
        raise InvalidInputError(f"recall_receipts row {_first_bad(bad)}: session_id "
                                f"{sid[_first_bad(bad)]!r} is not a session id (sess-<n>)")
    start = receipt_count(c) + 1
    expected = pl.select(pl.format("rcpt-{}", pl.int_range(start, start + n, dtype=pl.Int64))
                         .alias("id")).to_series()
    given = frame["id"]
    wrong = given.is_not_null() & (given != expected)
    if wrong.any():
        row = _first_bad(wrong)
        raise InvalidInputError(
            f"recall_receipts row {row}: id {given[row]!r} out of turn; receipt ids count per "
            f"store and the next one is {expected[row]!r} (leave id out to have it assigned)")
    return frame.with_columns(pl.lit(expected).alias("id"))


def _check_event_times(frame: pl.DataFrame) -> None:
    """An event time is an instant (``event_at``) or an interval (``event_from`` and an
    optional ``event_to`` no earlier than it), never both and never nothing."""
    at, lo, hi = (frame[n] for n in _EVENT_COLUMNS)
    rules = [
        (at.is_null() & lo.is_null() & hi.is_null(),
         "holds no time; give event_at, or event_from (and event_to)"),
        (at.is_not_null() & (lo.is_not_null() | hi.is_not_null()),
         "gives both event_at and an interval; a fact happened at an instant or over an "
         "interval, give one"),
        (hi.is_not_null() & lo.is_null(), "has event_to without event_from"),
        ((hi < lo).fill_null(False), "has event_to before event_from"),
    ]
    for bad, what in rules:
        if bad.any():
            raise InvalidInputError(f"event_times row {_first_bad(bad)} {what}")


def _check_epistemics(frame: pl.DataFrame) -> None:
    state = frame["evidence_state"]
    bad = state.is_not_null() & ~state.is_in(S.EVIDENCE_STATES)
    if bad.any():
        raise _vocab_error("evidence_state", state[_first_bad(bad)], S.EVIDENCE_STATES)
    empty = state.is_null() & frame["proof_hint"].is_null() & frame["stale_if"].is_null()
    if empty.any():
        raise InvalidInputError(f"epistemics row {_first_bad(empty)} sets nothing; give "
                                f"evidence_state, proof_hint or stale_if")


# ---- taught recall aliases (nMEMORY's memory_alias) ------------------------------------------

def teach_alias(c: Commit, term: str, alias: str) -> bool:
    """Stage one taught alias; False (and nothing written) when the pair is stored already."""
    for name, value in (("term", term), ("alias", alias)):
        if not isinstance(value, str):
            raise InvalidInputError(f"teach_alias: {name} must be text (a str); got "
                                    f"{type(value).__name__} {value!r:.60}")
    term_f, alias_f = pl.select(fold_expr(pl.lit(term, dtype=pl.String)),
                                fold_expr(pl.lit(alias, dtype=pl.String)).alias("a")).row(0)
    for name, value, f, want in (("term", term, term_f, "the word recall callers search with"),
                                 ("alias", alias, alias_f, "the word recall should also search")):
        if f == "":
            raise InvalidInputError(f"teach_alias: {name} {value!r:.60} is empty once folded "
                                    f"(trimmed, lowercased); give {want}")
    if term_f == alias_f:
        raise InvalidInputError(
            f"teach_alias: alias {alias!r:.60} folds to the term itself ({term_f!r:.60}); an "
            f"alias must name a different word (case and Latin accents are folded away)")
    written = append_events(c, "recall_aliases", _one_row(term=term, alias=alias),
                            operation=None)
    c.operations.append("teach_alias")
    return bool(written)


def _alias_rows(c: Commit, frame: pl.DataFrame) -> pl.DataFrame:
    """Fold taught aliases as the engine does (trim, lowercase, the Latin table of reference
    4.7), refuse an empty side or a pair that folds to one word, and keep only the pairs
    neither the store nor an earlier row holds (the first ``at`` stays, as the engine's
    primary key keeps it). The spelling given stays beside, for the journal row."""
    given_term, given_alias = S.ALIAS_GIVEN
    frame = frame.with_columns(pl.col("term").alias(given_term),
                               pl.col("alias").alias(given_alias),
                               fold_expr(pl.col("term")).alias("term"),
                               fold_expr(pl.col("alias")).alias("alias"))
    for name in ("term", "alias"):
        empty = frame[name] == ""
        if empty.any():
            row = _first_bad(empty)
            raise InvalidInputError(f"recall_aliases row {row}: {name} "
                                    f"{frame[S.ALIAS_GIVEN[name == 'alias']][row]!r:.60} is "
                                    f"empty once folded (trimmed, lowercased); give a word")
    same = frame["term"] == frame["alias"]
    if same.any():
        row = _first_bad(same)
        raise InvalidInputError(f"recall_aliases row {row}: alias {frame[given_alias][row]!r:.60} "
                                f"folds to its term ({frame['term'][row]!r:.60}); an alias must "
                                f"name a different word")
    key = list(S.RULES["recall_aliases"].dedupe)
    frame = frame.unique(key, keep="first", maintain_order=True)
    stored = c.indexes.aliases_exist(frame.select(key))
    if c._new_aliases:
        stored = [s or pair in c._new_aliases
                  for s, pair in zip(stored, frame.select(key).iter_rows(), strict=True)]
    frame = frame.filter(~pl.Series(stored, dtype=pl.Boolean))
    c._new_aliases.update(frame.select(key).iter_rows())
    return frame


# ---- review and pin (reference 2.1, 2.2, 4.17) ---------------------------------------------

# the rules of reviews and pins (their journal rows included) are in schema.RULES


def _optional_reason(verb: str, reason: str | None) -> None:
    if reason is not None and (not isinstance(reason, str) or not reason.strip()):
        raise InvalidInputError(
            f"{verb}: reason must be non-blank text or None; got {reason!r}"
        )


def review(c: Commit, capsule_id: str, verdict: str, reason: str | None = None) -> None:
    """Record a review verdict; the latest one decides whether the capsule is staged."""
    if verdict not in S.REVIEW_VERDICTS:
        raise _vocab_error("review verdict", verdict, S.REVIEW_VERDICTS)
    _optional_reason("review", reason)
    c.require_capsule(capsule_id, live=True)
    append_events(c, "reviews", _one_row(capsule_id=capsule_id, verdict=verdict, reason=reason),
                  operation="review")


def pin(c: Commit, capsule_id: str, pinned: bool = True, reason: str | None = None) -> None:
    """Pin (or unpin) a capsule; the latest pin row decides (journaled as ``memory_pin``)."""
    if not isinstance(pinned, bool):
        raise InvalidInputError(f"pin: pinned must be True or False; got {pinned!r}")
    _optional_reason("pin", reason)
    c.require_capsule(capsule_id, live=True)
    append_events(c, "pins", pl.DataFrame({"capsule_id": [capsule_id], "pinned": [pinned],
                                           "reason": [reason]},
                                          schema={"capsule_id": pl.String, "pinned": pl.Boolean,
                                                  "reason": pl.String}), operation="pin")
