"""Recall coverage: how often recall answers, what it answers with, and what never surfaces.

Everything is computed from one pinned generation of the store: the recall receipts
(nMEMORY 0.3.0's one row per retrieve, or ``store.record_recall(ids, terms=...)``), the
recorded misses, the usage rows and the capsule state.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any

import polars as pl

from memframe import budget
from memframe._scalars import as_date
from memframe.audit.misses import _in_window, folded_receipt_terms
from memframe.audit.state_ranges import capsule_state_ranges
from memframe.errors import InvalidInputError
from memframe.frames import json_records, records_json_pieces, sorted_by_columns
from memframe.schema import MISS_OUTCOMES, TIMESTAMP
from memframe.text import fold_expr, parse_instant, rfc3339_text

__all__ = ["RecallCoverage", "recall_coverage", "folded_receipt_terms"]

_NS_PER_DAY = 86_400 * 1_000_000_000
#: `never_recalled` before its age is computed (a store with no capsule)
_NEVER_SCHEMA = pl.Schema({"id": pl.String(), "project_id": pl.String(), "created_at": TIMESTAMP,
                           "kind": pl.String(), "tier": pl.String()})


@dataclass
class RecallCoverage:
    """The recall-coverage audit of one store generation.

    Attributes:
        daily: one row per UTC day (quiet days included): ``receipts``, ``hits``
            (receipts that returned at least one id), ``misses`` (recorded miss terms) with
            one column per outcome (``abstain``, ``missing_evidence``), ``hit_rate``
            (hits / receipts, null on a day without receipts).
        by_project: ``project_id`` (the receipt's; null when it named none),
            ``receipts``, ``hits``, ``hit_rate``.
        by_lane: the same per recall ``lane``.
        never_recalled: live capsules no usage row and no receipt names: ``id``,
            ``project_id``, ``created_at``, ``age_days`` (whole days at the generation's
            instant), ``kind``, ``tier``.
        answers: ``term`` (folded), ``capsule_id``, ``answers`` (receipts in which that
            capsule was returned for that term).
        concentration: per ``group`` (``all``, ``pinned``, ``unpinned``): ``capsules``
            (live), ``recalls``, ``top1_share`` and ``top10_share`` (the share of recalls
            taken by the most-recalled 1% and 10% of the group's capsules, rounded up).
        generation, since, until, project_prefix: what was audited.
    """

    daily: pl.DataFrame
    by_project: pl.DataFrame
    by_lane: pl.DataFrame
    never_recalled: pl.DataFrame
    answers: pl.DataFrame
    concentration: pl.DataFrame
    generation: int
    since: _dt.datetime | None = None
    until: _dt.datetime | None = None
    project_prefix: str | None = None

    @property
    def frames(self) -> dict[str, pl.DataFrame]:
        """Every frame of the audit by name."""
        return {"daily": self.daily, "by_project": self.by_project, "by_lane": self.by_lane,
                "never_recalled": self.never_recalled, "answers": self.answers,
                "concentration": self.concentration}

    @property
    def totals(self) -> dict[str, Any]:
        """Headline numbers: receipts, hits, hit rate, misses, never-recalled capsules."""
        receipts = int(self.daily["receipts"].sum())
        hits = int(self.daily["hits"].sum())
        return {"receipts": receipts, "hits": hits,
                "hit_rate": round(hits / receipts, 4) if receipts else None,
                "misses": int(self.daily["misses"].sum()),
                "never_recalled": self.never_recalled.height,
                "answered_terms": self.answers["term"].n_unique()}

    def _head(self) -> dict[str, Any]:
        return {
            "audit": "recall_coverage", "generation": self.generation,
            "window": {"since": rfc3339_text(self.since) if self.since else None,
                       "until": rfc3339_text(self.until) if self.until else None},
            "project_prefix": self.project_prefix, "totals": self.totals,
        }

    def to_dict(self) -> dict[str, Any]:
        return {**self._head(),
                **{name: json_records(frame) for name, frame in self.frames.items()}}

    def to_json(self) -> str:
        """Deterministic JSON text (same generation and arguments -> same bytes): the
        text of `to_dict`, each frame rendered a slice of rows at a time."""
        return "".join(self.json_pieces())

    def json_pieces(self) -> Iterator[str]:
        """The text of `to_json` in pieces (a few thousand rows each), to write a report of
        millions of never-recalled capsules without holding its text whole."""
        head = json.dumps(self._head(), ensure_ascii=False, separators=(",", ":"))
        yield head[:-1]
        for name, frame in self.frames.items():
            yield f",{json.dumps(name)}:"
            yield from records_json_pieces(frame)
        yield "}"

    def write_json(self, file: IO[str]) -> None:
        """Write `to_json`'s text to the text file ``file``, a piece at a time.

        Examples:
            >>> import io, os, tempfile
            >>> import memframe as mf
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> report = mf.audit.recall_coverage(store)
            >>> out = io.StringIO()
            >>> report.write_json(out)
            >>> out.getvalue() == report.to_json()
            True
        """
        for piece in self.json_pieces():
            file.write(piece)

    def to_text(self, limit: int = 20) -> str:
        """A plain-text report for a terminal."""
        from memframe._render.terminal import visible

        t = self.totals
        rate = "n/a" if t["hit_rate"] is None else f"{t['hit_rate']:.1%}"
        lines = [f"recall coverage, generation {self.generation}: {t['receipts']} receipts, "
                 f"{t['hits']} hits ({rate}), {t['misses']} recorded misses, "
                 f"{t['never_recalled']} live capsules never recalled"]
        for name in ("by_project", "by_lane", "concentration", "answers", "never_recalled"):
            frame = self.frames[name]
            lines.append("")
            lines.append(f"{name} ({frame.height} rows)")
            for row in frame.head(limit).iter_rows(named=True):
                lines.append("  " + visible(", ".join(f"{k}={v}" for k, v in row.items())))
        return "\n".join(lines)

    def to_html(self, limit: int = 50, *, as_page: bool = True) -> str:
        """One self-contained HTML page: the totals, the receipts chart, the tables."""
        from memframe._render.html import cards, fragment, html_table, page
        from memframe._render.svg import time_bar_chart

        body = [f"<h1>recall coverage, generation {self.generation}</h1>",
                cards([(k, "n/a" if v is None else v) for k, v in self.totals.items()])]
        if self.daily.height:
            bars = self.daily.select("day", "hits", (pl.col("receipts") - pl.col("hits"))
                                     .alias("answered_nothing"))
            body.append(time_bar_chart(
                bars, [("hits", "hits", "#54a24b"),
                       ("answered_nothing", "answered nothing", "#e45756")],
                title="Recall receipts per {unit} (UTC)").inline)
        for name, frame in self.frames.items():
            if frame.height:
                body.append(f"<h2>{name.replace('_', ' ')} ({frame.height:,})</h2>")
                body.append(html_table(frame, limit=limit))
        html = "".join(body)
        return page("memframe recall coverage", html) if as_page else fragment(html)

    def _repr_html_(self) -> str:
        return self.to_html(20, as_page=False)

    def __repr__(self) -> str:
        t = self.totals
        return (f"<RecallCoverage generation={self.generation} receipts={t['receipts']} "
                f"hits={t['hits']} never_recalled={t['never_recalled']}>")


def _rate(hits: pl.Expr, receipts: pl.Expr) -> pl.Expr:
    return pl.when(receipts > 0).then(hits / receipts).otherwise(None).alias("hit_rate")


def _tally(receipts: pl.LazyFrame) -> pl.LazyFrame:
    """``receipts`` and ``hits`` per (``day``, ``project_id``, ``lane``): one pass over the
    receipts that `daily`, `by_project` and `by_lane` all sum from."""
    return receipts.group_by(pl.col("at").dt.date().alias("day"), "project_id", "lane").agg(
        pl.len().cast(pl.Int64).alias("receipts"),
        (pl.col("returned").list.len() > 0).sum().cast(pl.Int64).alias("hits"))


def _group(tally: pl.DataFrame, key: str) -> pl.DataFrame:
    return (tally.group_by(key).agg(pl.col("receipts").sum(), pl.col("hits").sum())
            .with_columns(_rate(pl.col("hits"), pl.col("receipts")))
            .sort("receipts", key, descending=[True, False], nulls_last=True))


# Integer keys pack two numbers into one UInt64 (a receipt's place or a term's code, with a
# term's code or a capsule's number; a store holds far fewer than 2**32 of each), so the
# pairs are deduplicated and counted by sorting one integer column.
_HALF = 1 << 32


def _returned_numbers(expr: pl.Expr) -> pl.Expr:
    """A receipt's ``returned_ids`` as their capsule numbers (``cap-<n>`` -> n), as every
    write path checks them (a receipt names only ``cap-<n>`` ids of its store)."""
    return expr.list.eval(pl.element().str.strip_prefix("cap-").cast(pl.UInt64))


def _distinct_sorted(key: pl.Expr) -> pl.Expr:
    """The first row of each run of an ascending key (its distinct values, in order)."""
    return (key != key.shift(1)).fill_null(True)


def _answers(receipts: pl.LazyFrame) -> pl.LazyFrame:
    """``term`` (folded), ``capsule_id``, ``answers``: in how many receipts each returned
    capsule answered each folded term (a term twice in one receipt, or two spellings that
    fold alike, count once; a capsule returned twice counts twice), most answers first,
    then by term and capsule id.

    ``receipts`` holds ``terms`` and ``returned`` (`_returned_numbers`). The distinct
    spellings are folded once (a few thousand, not one per term row) into dense codes in
    term order; the (receipt, term) pairs are made unique and joined to the returned
    capsules in receipt order, and the (term, capsule) pairs counted in key order, all
    on integers.

    Examples:
        >>> import polars as pl
        >>> r = pl.LazyFrame({"terms": [["Café", "cafe", "--"], ["tea"], ["Tea"]],
        ...                   "returned_ids": [["cap-2", "cap-10"], ["cap-2"], []]})
        >>> r = r.select("terms", _returned_numbers(pl.col("returned_ids")).alias("returned"))
        >>> _answers(r).collect().rows()
        [('cafe', 'cap-10', 1), ('cafe', 'cap-2', 1), ('tea', 'cap-2', 1)]
    """
    rows = receipts.select(pl.int_range(pl.len(), dtype=pl.UInt64).alias("receipt"),
                           "terms", "returned")
    folded = (rows.select(pl.col("terms").explode().unique().drop_nulls().alias("spelled"))
              .with_columns(fold_expr(pl.col("spelled")).alias("term"))
              .filter(pl.col("term").str.contains(r"[[:alnum:]]")))
    codes = (folded.select(pl.col("term").unique().sort())
             .with_row_index("code").with_columns(pl.col("code").cast(pl.UInt64)))
    spellings = folded.join(codes, on="term").select("spelled", "code")
    # each (receipt, folded term) once, in receipt order
    asked = (rows.select("receipt", "terms").explode("terms")
             .join(spellings, left_on="terms", right_on="spelled")
             .select((pl.col("receipt") * _HALF + pl.col("code")).sort().alias("key"))
             .filter(_distinct_sorted(pl.col("key")))
             .select((pl.col("key") // _HALF).set_sorted().alias("receipt"),
                     (pl.col("key") % _HALF).alias("code")))
    returned = (rows.select(pl.col("receipt").set_sorted(), "returned").explode("returned")
                .drop_nulls("returned"))
    return (asked.join(returned, on="receipt")
            .select((pl.col("code") * _HALF + pl.col("returned")).sort().alias("key"))
            .group_by("key", maintain_order=True).agg(pl.len().cast(pl.Int64).alias("answers"))
            .select((pl.col("key") // _HALF).alias("code"),
                    pl.format("cap-{}", pl.col("key") % _HALF).alias("capsule_id"), "answers")
            .join(codes, on="code")
            .sort(["answers", "code", "capsule_id"], descending=[True, False, False])
            .select("term", "capsule_id", "answers"))


#: receipts folded at a time with no memory budget (their term and returned-id lists)
RECEIPT_ROWS = 1_000_000
_RECEIPT_BYTES = 1_500  # a receipt's share of a chunk's peak, its answer pairs included


def _fold_receipts(view: Any, kept: pl.Expr) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(`_tally`, `_answers` of the receipts ``kept`` selects, and ``num``: every capsule
    number any receipt returned, once): the receipts are read once, a few partitions at a
    time (`RECEIPT_ROWS`, or fewer under the memory budget), and the partial answers
    summed, so no more than a chunk's lists are held."""
    size = budget.chunk_rows(default=RECEIPT_ROWS, per_row=_RECEIPT_BYTES, fixed=0,
                             smallest=1_000, what="the recall-coverage audit")
    tallies, answers, returned = [], [], []
    for receipts in _receipt_chunks(view, size):
        rows = receipts.lazy().select(
            "at", "lane", "project_id", "terms",
            _returned_numbers(pl.col("returned_ids")).alias("returned"), kept.alias("kept"))
        window = rows.filter("kept")
        tally, answer, nums = pl.collect_all([
            _tally(window), _answers(window),
            rows.select(pl.col("returned").explode().alias("num")).drop_nulls().unique()])
        tallies.append(tally)
        answers.append(answer)
        returned.append(nums)
        del receipts, rows, window
    if len(answers) == 1:
        return tallies[0], answers[0], returned[0]
    tally = pl.concat(tallies).group_by("day", "project_id", "lane").agg(
        pl.col("receipts").sum(), pl.col("hits").sum())
    # a term's code orders as the term does: `_answers`' order, on the summed pairs
    answer = (pl.concat(answers).group_by("term", "capsule_id").agg(pl.col("answers").sum())
              .sort(["answers", "term", "capsule_id"], descending=[True, False, False]))
    return tally, answer, pl.concat(returned).unique()


def _receipt_chunks(view: Any, size: int) -> Iterator[pl.DataFrame]:
    """The ``recall_receipts`` rows a run of partitions of about ``size`` rows at a time,
    in the table's order (one empty frame when it has none)."""
    columns = ["at", "lane", "project_id", "project_prefix", "terms", "returned_ids"]
    group: list[Any] = []
    rows = 0
    parts = list(view.partitions("recall_receipts"))
    for i, part in enumerate(parts):
        group.append(part)
        rows += part.rows
        if rows >= size or i == len(parts) - 1:
            yield view.scan_partitions("recall_receipts", group).select(columns).collect()
            group, rows = [], 0
    if not parts:
        yield view.table("recall_receipts").select(columns).collect()


def _day_or_none(value: object) -> _dt.date | None:
    return None if value is None else as_date(value)


def _days(first: _dt.date | None, last: _dt.date | None) -> pl.DataFrame:
    if first is None or last is None or first > last:
        return pl.DataFrame(schema={"day": pl.Date()})
    return pl.DataFrame({"day": pl.date_range(first, last, "1d", eager=True)})


def _concentration(state: pl.DataFrame) -> pl.DataFrame:
    rows = []
    for group, members in (("all", state), ("pinned", state.filter(pl.col("pinned"))),
                           ("unpinned", state.filter(~pl.col("pinned")))):
        counts = members["recall_count"].sort(descending=True)
        total = int(counts.sum()) if counts.len() else 0
        n = counts.len()

        def share(fraction: float, counts: pl.Series = counts, n: int = n,
                  total: int = total) -> float | None:
            if not total:
                return None
            return round(int(counts.head(math.ceil(n * fraction)).sum()) / total, 6)

        rows.append({"group": group, "capsules": n, "recalls": total,
                     "top1_share": share(0.01), "top10_share": share(0.10)})
    return pl.DataFrame(rows, schema={"group": pl.String, "capsules": pl.Int64,
                                      "recalls": pl.Int64, "top1_share": pl.Float64,
                                      "top10_share": pl.Float64})


def recall_coverage(store: Any, *, since: _dt.datetime | _dt.date | str | None = None,
                    until: _dt.datetime | _dt.date | str | None = None,
                    project_prefix: str | None = None,
                    memory_limit: str | int | None = None) -> RecallCoverage:
    """Audit how recall answers, at one pinned generation of a store (or a frozen view).

    Args:
        store: a :class:`memframe.Store` or a view (``store.at(g)``, ``store.as_of(t)``).
        since: keep receipts, misses and usage at or after this instant (a date means its
            midnight UTC); the daily frame starts on its day.
        until: keep those strictly before this instant; the daily frame ends on the day
            before it (or its day, for an instant past midnight).
        project_prefix: keep receipts whose project (or, when they name none, whose
            prefix) starts with it, and capsules whose project does. Recorded misses carry
            no project, so the ``misses`` columns stay store-wide.
        memory_limit: the most memory the read of every capsule's state may hold (e.g.
            ``"2GB"``; default: `memframe.memory_limit`, ``MEMFRAME_MEMORY_LIMIT``, else no
            limit): ``never_recalled`` reads the state one range of capsules at a time.

    Returns:
        A :class:`RecallCoverage`. ``never_recalled`` is over the whole generation: a
        live capsule that no usage row and no receipt's ``returned_ids`` names.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> days = iter(dt.datetime(2026, 7, d, tzinfo=dt.UTC) for d in range(1, 30))
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"),
        ...                         clock=lambda: next(days))
        >>> a, b = store.ingest([{"content": t, "source": "s", "anchor": t}
        ...                      for t in ("deploys run on fridays", "unused note")])
        >>> store.record_recall([a], terms=["Deploy"])
        >>> _ = store.record_miss(["canary"], "abstain")
        >>> store.record_recall([], terms=["canary"])
        >>> cov = recall_coverage(store)
        >>> cov.daily.select("day", "receipts", "hits", "misses").rows()[0]
        (datetime.date(2026, 7, 2), 1, 1, 0)
        >>> cov.never_recalled["id"].to_list(), cov.answers.rows()
        (['cap-2'], [('deploy', 'cap-1', 1)])
    """
    since_at = parse_instant(since, "since")
    until_at = parse_instant(until, "until")
    if since_at is not None and until_at is not None and since_at > until_at:
        raise InvalidInputError(f"since ({rfc3339_text(since_at)}) is after until "
                                f"({rfc3339_text(until_at)}); the window is [since, until)")
    if project_prefix is not None and not isinstance(project_prefix, str):
        raise InvalidInputError(f"project_prefix is text or None; got {project_prefix!r:.60}")
    with budget.memory_limit(memory_limit):
        return _coverage(store.pinned(), since_at, until_at, project_prefix)


def _coverage(view: Any, since_at: _dt.datetime | None, until_at: _dt.datetime | None,
              project_prefix: str | None) -> RecallCoverage:
    window = _in_window(since_at, until_at)
    fence = pl.lit(True)
    if project_prefix:
        fence = pl.coalesce("project_id", "project_prefix").str.starts_with(project_prefix) \
            .fill_null(False)
    capsule_fence = (pl.col("project_id").str.starts_with(project_prefix) if project_prefix
                     else pl.lit(True))
    live_ranges = capsule_state_ranges(  # the budget is checked now, before a read
        view, ["id", "project_id", "created_at", "kind", "tier", "recall_count"],
        (pl.col("status") == "live") & capsule_fence)
    misses, usage, pins = pl.collect_all([
        view.table("recall_misses").filter(window & pl.col("outcome").is_in(list(MISS_OUTCOMES)))
        .select("at", "outcome"),
        view.table("recalls").select(
            pl.col("capsule_id").str.strip_prefix("cap-").cast(pl.UInt64).alias("num")),
        view.table("pins").sort("seq").group_by("capsule_id").agg(pl.col("pinned").last()),
    ])
    tally, answers, returned = _fold_receipts(view, window & fence)
    recalled = pl.concat([returned, usage]).drop_nulls()
    # daily: every day from the window's (or the data's) first to its last
    miss_days = misses.with_columns(pl.col("at").dt.date().alias("day"))
    seen = pl.concat([tally.select("day"), miss_days.select("day")])
    # (no receipt and no miss: no day, an empty frame)
    first = as_date(since_at.date()) if since_at is not None else _day_or_none(seen["day"].min())
    last: _dt.date | None
    if until_at is not None:
        end = until_at - _dt.timedelta(microseconds=1) if until_at.time() == _dt.time(0) \
            else until_at
        last = as_date(end.astimezone(_dt.UTC).date())
    else:
        last = _day_or_none(seen["day"].max())
    per_day = tally.group_by("day").agg(pl.col("receipts").sum(), pl.col("hits").sum())
    per_miss = miss_days.group_by("day").agg(
        pl.len().cast(pl.Int64).alias("misses"),
        *[(pl.col("outcome") == o).sum().cast(pl.Int64).alias(o) for o in MISS_OUTCOMES])
    daily = (_days(first, last)
             .join(per_day, on="day", how="left").join(per_miss, on="day", how="left")
             .with_columns(pl.exclude("day").fill_null(0))
             .with_columns(_rate(pl.col("hits"), pl.col("receipts")))
             .select("day", "receipts", "hits", "misses", *MISS_OUTCOMES, "hit_rate")
             .sort("day"))
    # never recalled: live capsules no usage row and no receipt names; ages at the
    # generation's commit, not the wall clock: the same store reads the same
    now = (parse_instant(view.committed_at, "committed_at") if view.committed_at
           else view.now())
    named = recalled["num"].unique().implode()
    never_parts, recall_parts = [], []
    for live in live_ranges:  # the whole state is never held: one range at a time
        never_parts.append(live.filter(~pl.col("id").str.strip_prefix("cap-").cast(pl.UInt64)
                                       .is_in(named)).drop("recall_count"))
        recall_parts.append(live.join(pins.rename({"capsule_id": "id"}), on="id", how="left")
                            .select(pl.col("pinned").fill_null(False),
                                    pl.col("recall_count").fill_null(0)))
    never = (pl.concat(never_parts) if never_parts else pl.DataFrame(schema=_NEVER_SCHEMA))
    del never_parts
    never = never.select("id", "project_id", "created_at",
                         ((pl.lit(now).cast(pl.Datetime("ns", "UTC")) - pl.col("created_at"))
                          .dt.total_nanoseconds() // _NS_PER_DAY).cast(pl.Int64)
                         .alias("age_days"), "kind", "tier")
    # a column at a time: tens of millions of never-recalled rows are not held twice
    never = sorted_by_columns(never, "created_at", pl.col("id").str.slice(4).cast(pl.Int64))
    live_recalls = (pl.concat(recall_parts) if recall_parts
                    else pl.DataFrame(schema={"pinned": pl.Boolean, "recall_count": pl.Int64}))
    return RecallCoverage(
        daily=daily,
        by_project=_group(tally, "project_id"),
        by_lane=_group(tally, "lane"),
        never_recalled=never,
        answers=answers,
        concentration=_concentration(live_recalls),
        generation=view.generation, since=since_at, until=until_at,
        project_prefix=project_prefix,
    )
