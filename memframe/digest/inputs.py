"""Reading what the digest needs, once, from one pinned generation.

Every table is read at most once per digest call; ``rows_visited`` adds the partition
row counts of each table that was read. Tables split in two groups (reference 5):

* fail-closed tables: any read error (or a row the digest cannot use) fails the whole
  digest with ``DigestFailedError("memory_digest failed: ...")``;
* fail-open tables (the recall-miss ledger, lane overrides, the git witness tables):
  a read error only marks that table unavailable (``None``) and the sections built on
  it degrade on their own.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from memframe.digest.checks import check_tables
from memframe.digest.families import FAMILIES
from memframe.digest.state import family_codec, kept_families, seal, session_edges
from memframe.errors import DigestFailedError, MemframeError
from memframe.state import STATE_SCHEMA, fold_state, state_frame

__all__ = [
    "DigestInputs",
    "StateNotWarm",
    "FAIL_CLOSED",
    "FAIL_OPEN",
    "COLUMNS",
    "read_inputs",
    "inputs_from_tables",
    "digest_failed",
]

#: columns the digest reads from each table (projection pushdown).
COLUMNS: dict[str, tuple[str, ...]] = {
    "capsules": (
        "seq", "id", "created_at", "project_id", "content", "source", "valid_to",
        "authority_class", "instruction_taint",
    ),
    "relations": ("seq", "kind", "from_id", "to_id"),
    "forgets": ("seq", "at", "capsule_id", "mode"),
    "recalls": ("seq", "at", "capsule_id", "count"),
    "classifications": ("seq", "capsule_id", "kind", "scope"),
    "tiers": ("seq", "capsule_id", "tier"),
    "brackets": ("seq", "at", "session_id", "event"),
    "journal": ("seq", "audit_seq", "at", "actor", "action", "subject", "reason", "chained_hash"),
    "recall_misses": ("seq", "at", "term", "outcome"),
    "lane_overrides": ("seq", "at", "forced", "auto_pick"),
    "corroborations": ("seq", "capsule_id", "source", "kind", "ref", "verdict"),
    "source_cursors": ("seq", "at", "source_key", "cursor"),
    "reviews": ("seq", "at", "capsule_id", "verdict"),
    "pins": ("seq", "capsule_id", "pinned"),
}
#: the journal columns a digest reads when the chain is checked from its checkpoint (the
#: chain walk reads the rows it verifies itself)
JOURNAL_LIGHT: tuple[str, ...] = ("seq", "audit_seq", "at", "action", "subject")
FAIL_CLOSED: tuple[str, ...] = (
    "capsules", "relations", "forgets", "recalls", "classifications", "tiers", "brackets",
    "journal", "reviews", "pins",
)
FAIL_OPEN: tuple[str, ...] = ("recall_misses", "lane_overrides", "corroborations", "source_cursors")


class StateNotWarm(Exception):
    """`read_inputs` was asked to read the stored digest state and there is none (the job
    never recorded it)."""


def digest_failed(detail: object) -> DigestFailedError:
    """The fail-closed error of the digest (reference 1.1 / 5).

    Examples:
        >>> str(digest_failed("journal: gap"))
        'memory_digest failed: journal: gap'
    """
    return DigestFailedError(f"memory_digest failed: {detail}")


@dataclass
class DigestInputs:
    """Everything one digest call reads, pinned to one generation.

    Attributes:
        tables: the fail-closed tables, collected.
        optional: the fail-open tables, collected, or None when their read failed.
        state: capsule state (every capsule, tombstoned included), collected, with the
            digest's ``staged`` and ``pinned`` flags.
        now: the instant that feeds ``expired`` and ``archive_candidates``.
        rows_visited: Parquet rows read (sum of partition row counts of each read table).
        generation: the generation read, when known.
        chain: the journal chain verdict when it was checked from the store's checkpoint
            (None: the assembler walks the whole journal it holds).
        attach: adds ``content`` to capsule rows when the state was read without it (a
            store's digest reads the content of the rows it emits only); None when the
            state holds it.
        tombstoned: the tombstoned capsule ids, sorted (None: taken from ``forgets``).
        audit_events: the journal's row count (None: the height of ``tables["journal"]``).
        warm: the digest state's aggregates, subset and top-N readers
            (`memframe.digest.state.warm_reader.WarmState`) when the digest answers from
            them; ``state`` then holds the subset's rows only.
        globals: family -> its store-wide values kept by the digest job, for the
            families that were current (`memframe.digest.state.kept_families`); their
            tables were not read. The graph's values are a `KeptGraph` (read on first
            use).
        kept_sections: the unfenced subset sections and ``dag`` as the digest job kept
            them, for this digest's cap and instant (`memframe.digest.state.sections.cap_kept`),
            when current (`memframe.digest.state.sections`); ``state`` is then
            empty: no section reads it.

    A store's digest reads the per-capsule tables through the digest state
    (`memframe.digest.state.digest_capsules`): ``tables`` then holds only ``relations``,
    ``brackets``, ``reviews`` and ``pins``, and ``state`` carries the journal coverage
    flags (``named``, ``forget_named``).
    """

    tables: dict[str, pl.DataFrame]
    optional: dict[str, pl.DataFrame | None]
    state: pl.DataFrame
    now: _dt.datetime
    rows_visited: int = 0
    generation: int | None = None
    read_errors: dict[str, str] = field(default_factory=dict)
    chain: dict | None = None
    attach: Callable[[pl.DataFrame], pl.DataFrame] | None = None
    tombstoned: pl.Series | None = None
    audit_events: int | None = None
    warm: Any = None
    globals: dict[str, Any] = field(default_factory=dict)
    kept_sections: dict | None = None


class KeptGraph:
    """The graph family's kept values, read on first use: a digest answered from the kept
    sections (`memframe.digest.state.sections`) never reads them."""

    def __init__(self, view: Any, fresh: session_edges.FreshEdges | None = None) -> None:
        self.view = view
        #: blocks edges written since, between ids the kept values never named
        self.fresh = fresh
        self._values: dict[str, Any] | None = None
        self._read = 0

    def values(self) -> dict[str, Any]:
        if self._values is None:
            self._values, self._read = kept_families.read_values(self.view, "graph")
            if self.fresh is not None:
                self._values = self.fresh.values(self._values)
        return self._values

    @property
    def rows_visited(self) -> int:
        """Parquet rows read: the values, and the board's member lookups since."""
        reads = self._values.get("_reads") if self._values is not None else None
        return self._read + (reads.rows_visited if reads is not None else 0)


def _collect(frame: pl.LazyFrame | pl.DataFrame, columns: Sequence[str | pl.Expr]
             ) -> pl.DataFrame:
    frame = frame.select(list(columns))
    return frame.collect() if isinstance(frame, pl.LazyFrame) else frame


def _check_fail_closed(tables: Mapping[str, pl.LazyFrame | pl.DataFrame]) -> None:
    """The row checks the digest fails on (a corrupt capsule row, an unknown kind...):
    `memframe.digest.checks.check_tables`, the one set every path uses. A table not read
    here (its values were kept by the digest job) was checked by the job."""
    problem = check_tables(tables)
    if problem:
        raise digest_failed(problem)


def _collect_together(
    read: Callable[[str], pl.LazyFrame | pl.DataFrame], names: tuple[str, ...],
    columns: Mapping[str, Sequence[str | pl.Expr]],
) -> dict[str, pl.DataFrame] | None:
    """Read several tables in one parallel collect; None when any read fails, so that the
    caller reads them one by one and names the table that failed."""
    try:
        frames = [read(name).lazy().select(list(columns[name])) for name in names]
        return dict(zip(names, pl.collect_all(frames, engine="streaming"), strict=True))
    except Exception:  # noqa: BLE001 - retried table by table for a precise error
        return None


def _build(
    read: Callable[[str], pl.LazyFrame | pl.DataFrame],
    row_count: Callable[[str, pl.DataFrame], int],
    now: _dt.datetime,
    generation: int | None,
    columns: Mapping[str, Sequence[str | pl.Expr]] = COLUMNS,
    names: tuple[str, ...] = FAIL_CLOSED,
    from_state: Callable[[dict[str, pl.DataFrame]], tuple[pl.DataFrame, int]] | None = None,
    optional_names: tuple[str, ...] = FAIL_OPEN,
) -> DigestInputs:
    visited = 0
    tables: dict[str, pl.DataFrame] = {}
    together = _collect_together(read, names, columns)
    for name in names:
        try:
            frame = together[name] if together else _collect(read(name), columns[name])
        except MemframeError as exc:
            raise digest_failed(f"{name}: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - any read error fails the digest closed
            raise digest_failed(f"cannot read {name}: {exc}") from exc
        tables[name] = frame
        visited += row_count(name, frame)
    _check_fail_closed(tables)
    optional: dict[str, pl.DataFrame | None] = {}
    errors: dict[str, str] = {}
    for name in optional_names:
        try:
            frame = _collect(read(name), COLUMNS[name])
        except Exception as exc:  # noqa: BLE001 - fail-open leg: only its own keys degrade
            optional[name] = None
            errors[name] = f"{type(exc).__name__}: {exc}"
            continue
        optional[name] = frame
        visited += row_count(name, frame)
    try:
        if from_state is not None:
            state, n = from_state(tables)
            visited += n
        else:
            state = reference_state(tables)
    except MemframeError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(f"capsule state: {exc}") from exc
    return DigestInputs(
        tables=tables,
        optional=optional,
        state=state,
        now=now,
        rows_visited=visited,
        generation=generation,
        read_errors=errors,
    )


def reference_state(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The capsule state of the reference read: THE fold (`memframe.state.fold_state`) of
    every row of the per-capsule tables, as the digest reads it (`state_frame`), with each
    capsule's ``content`` when the tables hold it (else the digest reads the content of
    the rows it emits)."""
    state = state_frame(fold_state(tables))
    if "content" not in tables["capsules"].columns:
        return state
    content = tables["capsules"].select("seq", "content")
    return state.join(content, on="seq", how="left", maintain_order="left")


def _complete(tables: Mapping[str, Any]) -> Callable[[str], pl.LazyFrame | pl.DataFrame]:
    from memframe.schema import empty_frame

    def read(name: str) -> pl.LazyFrame | pl.DataFrame:
        frame = tables.get(name)
        if frame is None:
            return empty_frame(name)
        return frame

    return read


def inputs_from_tables(
    tables: Mapping[str, pl.LazyFrame | pl.DataFrame],
    now: _dt.datetime,
) -> DigestInputs:
    """Digest inputs from hand-made canonical tables (missing tables read as empty).

    ``rows_visited`` is then the number of rows of each table read.

    Examples:
        >>> import datetime as dt
        >>> from memframe.schema import empty_frame
        >>> now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> inputs_from_tables({"capsules": empty_frame("capsules")}, now).rows_visited
        0
    """
    return _build(_complete(tables), lambda _name, frame: frame.height, now, None)


#: the fail-closed tables a store's digest reads in full beside the digest state
STATE_TABLES: tuple[str, ...] = ("relations", "brackets", "reviews", "pins")


def _state_reader(view: Any) -> Callable[[dict[str, pl.DataFrame]], tuple[pl.DataFrame, int]]:
    """The capsule state of a store from the digest state plus the rows above its
    watermark (`memframe.digest.state.warm_reader.read_state`), checked as the full read is."""
    from memframe.digest.state import warm_reader

    def build(tables: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, int]:
        try:
            raw, visited, unfolded = warm_reader.read_state(view)
            _check_fail_closed(unfolded)
            return state_frame(raw), visited
        except DigestFailedError:
            raise
        except MemframeError as exc:
            raise digest_failed(exc) from exc

    return build


def _warm_reader(view: Any, holder: dict[str, Any], cold: bool = False,
                 sections: tuple[int, str | None] | None = None,
                 shared: Any = None, kept: bool = False, require: bool = False,
                 fresh: session_edges.FreshEdges | None = None,
                 ) -> Callable[[dict[str, pl.DataFrame]], tuple[pl.DataFrame, int]]:
    """The subset's capsule state, the aggregates and the top-N readers (into
    ``holder["warm"]``), checked as the full read is; None in ``holder`` when the job
    never recorded them. A cold fold keeps the candidates of the top-N lists of
    ``sections`` (the list cap and the fence) only, when given. With ``kept`` (the graph's
    kept values are current, or there is no graph), an unfenced digest takes the subset
    sections the job kept when they are current (into ``holder["kept"]``), and reads no
    subset row; ``fresh``: the graph's new blocks edges the kept values take in
    (`memframe.digest.state.session_edges.FreshEdges`), added to the kept ``dag`` and
    ``relations``. ``require``: raise `StateNotWarm` rather than fold every row."""
    from memframe.digest.state import cold_fold, warm_reader
    from memframe.digest.state.sections import CAP, read_current
    from memframe.digest.warm import top_requests

    tops = top_requests(*sections) if sections is not None else None

    def build(tables: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, int]:
        try:
            found = (cold_fold.fold_warm(view, tops) if cold
                     else warm_reader.read_warm(view, shared))
            if found is None:  # the job never recorded the aggregates: fold them now
                if require:
                    raise StateNotWarm("the digest job never recorded the state")
                found = cold_fold.fold_warm(view, tops)
            warm, unfolded = found
            _check_fail_closed(unfolded)
            holder["warm"] = warm
            if warm.in_memory:  # every source row was read: counted here
                visited, warm.rows_visited = warm.rows_visited, 0
                return state_frame(warm.subset), visited
            if kept and sections is not None and sections[1] is None \
                    and not warm.subset_changed():
                values, n = read_current(view, sections[0])
                warm.rows_visited += n
                if values is not None and fresh is not None:
                    values = {**values, "dag": fresh.dag(values["dag"], CAP),
                              "relations": values["relations"] + fresh.relations}
                if values is not None and values.pop("_member_admission", False):
                    values = None  # the board reads members' state (assemble.kept_values)
                if values is not None:  # no section reads the state
                    holder["kept"] = values
                    empty = pl.DataFrame(schema=STATE_SCHEMA)
                    return state_frame(empty), 0
            return state_frame(warm.subset), 0
        except DigestFailedError:
            raise
        except MemframeError as exc:
            raise digest_failed(exc) from exc

    return build


def read_inputs(view: Any, now: _dt.datetime | None, verify: str = "incremental",
                fast: bool = False, sections: tuple[int, str | None] | None = None,
                kept: bool = True, trust_state: bool | None = None,
                shared: Any = None) -> DigestInputs:
    """Digest inputs from a pinned store view (``table``, ``row_count``, ``now``).

    With ``verify="incremental"`` the per-capsule tables (capsules, recalls,
    classifications, tiers, forgets, journal) are read through the digest state: its
    stored rows plus the rows above its watermark, so the answer is exact whether the
    job ran or not; and the journal chain is checked from the store's verified
    checkpoint (:func:`memframe.digest.state.journal.check_chain`). With ``"full"`` no
    derived state is trusted: every table is read and the whole chain is walked.

    With ``fast`` (one fence, not ``"full"``), the capsule sections are answered from the
    digest state's aggregates, subset and top-N readers (see `memframe.digest.warm`):
    the stored ones plus the rows above the watermark when the journal checkpoint holds,
    else folded now from every source row by the state's own fold, one range of capsule
    numbers at a time (the cold digest, `memframe.digest.state.cold_fold.fold_warm`:
    its peak follows the range, not the store); ``state`` then holds
    only the subset's rows. ``sections`` (the list cap and the fence the capsule
    sections will be answered for) lets that cold fold keep only the candidates of their
    top-N lists rather than every state row. With ``kept`` (and no fence), the subset
    sections come from what the digest job kept when it is current
    (`memframe.digest.state.sections`): ``kept_sections``. ``trust_state`` (the
    digest job's own reads): True reads the stored state as the job that keeps it does,
    whether or not the journal checkpoint holds (the chain is not checked: ``chain`` stays
    None), and raises `StateNotWarm` when there is none; False folds every row whatever
    is stored (the rebuild door's reads). ``shared``: source parts the caller read
    already, with their rows (`memframe.digest.state.digest_capsules.read_above`).
    """
    from memframe.digest.scope import THREAD_PATTERN
    from memframe.digest.state.journal import check_chain

    if now is None:
        now = view.now()
    generation = getattr(view, "generation", None)
    columns: dict[str, Sequence[str | pl.Expr]] = dict(COLUMNS)
    # the chain walk reads the rows it verifies itself, part by part; the content is read
    # only for the rows the digest emits (its ACTIVE() label is taken while reading)
    columns["journal"] = JOURNAL_LIGHT
    columns["capsules"] = [
        *(c for c in COLUMNS["capsules"] if c != "content"),
        pl.col("content").str.extract(THREAD_PATTERN, 1).alias("thread"),
    ]
    check = None
    if trust_state is not True:  # (the job trusts its own state: no chain check)
        try:
            check = check_chain(view, verify)
        except MemframeError as exc:
            raise digest_failed(f"journal: {exc}") from exc
        except Exception as exc:  # noqa: BLE001 - any read error fails the digest closed
            raise digest_failed(f"cannot verify the journal: {exc}") from exc
    # the digest state is trusted as far as the journal checkpoint is: when the verified
    # parts are not the very files verified (or nothing was verified), every table is read
    warm = verify != "full" and check is not None and check.walked == "incremental"
    # ... and as far as the canonical parts it folded are the files sealed (one stat each)
    warm = warm and seal.holds(view)
    if trust_state is not None:  # the job's reads: it trusts its own state (or none)
        warm = trust_state and verify != "full"
    holder: dict[str, Any] = {}
    families: dict[str, Any] = {}
    kept_rows = 0
    optional_names = FAIL_OPEN
    if fast and verify != "full":  # stored state only when the checkpoint holds
        if warm:
            families, kept_rows = _kept_families(view)
        # the journal parts the chain check walked are the state's new journal rows
        if check is not None:
            shared = {"journal": check.read} if check.read is not None else None
        from memframe.digest.state.sections import graph_settled

        names, from_state = (*STATE_TABLES, "forgets"), _warm_reader(
            view, holder, not warm, sections, shared,
            kept and graph_settled(view, "graph" in families), trust_state is True,
            getattr(families.get("graph"), "fresh", None))
        if warm:
            skip = {t for family in families for t in FAMILIES[family]}
            names = tuple(t for t in names if t not in skip)
            optional_names = tuple(t for t in FAIL_OPEN if t not in skip)
    elif warm:
        names, from_state = STATE_TABLES, _state_reader(view)
    else:
        names, from_state = FAIL_CLOSED, None
    inputs = _build(
        view.table,
        lambda name, _frame: int(view.row_count(name)),
        now,
        int(generation) if generation is not None else None,
        columns,
        names=names,
        from_state=from_state,
        optional_names=optional_names,
    )
    inputs.globals = families
    inputs.rows_visited += kept_rows
    if fast and verify != "full":
        inputs.warm = holder["warm"]
        if "kept" in holder and sections is not None:
            from memframe.digest.state.sections import cap_kept

            inputs.kept_sections = cap_kept(holder["kept"], sections[0], now)
        # the journal's rows as the log records them, or (when the verified parts could
        # not be confirmed) as the files hold them
        inputs.audit_events = int(view.row_count("journal")) if warm else int(
            view.table("journal").select(pl.len()).collect().item())
    elif warm:
        inputs.tombstoned = (inputs.state.filter(pl.col("status") == "tombstoned")
                             .get_column("id").unique().sort())
        inputs.audit_events = int(view.row_count("journal"))
    inputs.attach = _content_reader(view, inputs)
    if check is not None:
        inputs.chain = check.section
        inputs.rows_visited += check.rows_visited
    return inputs


def _kept_families(view: Any) -> tuple[dict[str, Any], int]:
    """The store-wide values the digest job kept and that are current at ``view`` (the
    graph's as a `KeptGraph`, read on first use; the others read in one collect)."""
    kept: dict[str, Any] = {}
    visited = 0
    current: list[str] = []
    for family in FAMILIES:
        try:
            ok, n = kept_families.is_current(view, family)
        except kept_families.UNREADABLE:  # unreadable kept values: read the tables instead
            continue
        visited += n
        if ok and family == "graph":
            kept[family] = KeptGraph(view)
        elif family == "graph":  # a session's new blocks edges leave the rest as kept
            try:
                fresh = session_edges.fresh_edges(view)
            except kept_families.UNREADABLE:  # unreadable kept ids: read the tables
                fresh = None
            if fresh is not None:
                kept[family] = KeptGraph(view, fresh)
                visited += fresh.rows_visited
        elif ok:
            current.append(family)
    try:
        frames = pl.collect_all([
            view.derived(family_codec.table_of(f), family_codec.MEMO_SCHEMA)
            for f in current], engine="in-memory") if current else []
    except kept_families.UNREADABLE:  # unreadable kept values: read the tables instead
        return kept, visited
    for family, rows in zip(current, frames, strict=True):
        kept[family] = family_codec.decode(family, rows, view)
        visited += view.row_count(family_codec.table_of(family))
    return kept, visited


def _content_reader(view: Any, inputs: DigestInputs) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """``attach`` for a store: reads ``content`` by ``seq`` for the rows asked (once each),
    adding the Parquet rows read to ``inputs.rows_visited``."""
    cache: dict[int, str | None] = {}

    def attach(rows: pl.DataFrame) -> pl.DataFrame:
        seqs = rows.get_column("seq").to_list()
        missing = [s for s in seqs if s not in cache]
        if missing:
            try:
                found, n = view.read_by_seq("capsules", missing, ["seq", "content"])
            except Exception as exc:  # noqa: BLE001 - a fail-closed read
                raise digest_failed(f"cannot read capsules: {exc}") from exc
            inputs.rows_visited += n
            cache.update(zip(found["seq"].to_list(), found["content"].to_list(), strict=True))
        content = pl.Series("content", [cache.get(s) for s in seqs], dtype=pl.String)
        return rows.with_columns(content)

    return attach
