"""The audit's charts, drawn from its frames: one drawing for the audit page, the notebook
fragment and :mod:`memframe.display`, so a chart looks the same wherever it shows."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import polars as pl

from memframe._render.html import label
from memframe._render.svg import Chart, hbar_chart, rank_chart, time_bar_chart
from memframe.schema import LANE_PAIRS

__all__ = ["OUTCOME_COLORS", "LANE_COLORS", "LANE_PAIR_COLORS", "lane_color", "miss_trend",
           "top_terms", "lane_overrides",
           "recall_ranks"]

#: one colour per miss outcome, the same in every chart and page
OUTCOME_COLORS: dict[str, str] = {"abstain": "#4c78a8", "missing_evidence": "#f58518"}
LANE_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#9d9d9d", "#e45756")
#: one colour per lane pair of the closed vocabulary, whatever pairs a store holds (so a
#: pair has the same colour on every page, for every store), in the vocabulary's order
LANE_PAIR_COLORS: dict[str, str] = {f"{forced}->{auto}": LANE_COLORS[i]
                                    for i, (forced, auto) in enumerate(LANE_PAIRS)}


def lane_color(pair: str) -> str:
    """The colour of a ``forced->auto`` lane pair: fixed for the vocabulary's pairs, and
    for any other pair one of the spare colours chosen by its name alone.

    Examples:
        >>> lane_color("term->fused"), lane_color("fused->term")
        ('#4c78a8', '#b279a2')
        >>> lane_color("x->y") == lane_color("x->y") in LANE_COLORS[len(LANE_PAIRS):]
        True
    """
    if pair in LANE_PAIR_COLORS:
        return LANE_PAIR_COLORS[pair]
    spare = LANE_COLORS[len(LANE_PAIRS):]
    return spare[int(hashlib.sha256(pair.encode("utf-8")).hexdigest()[:8], 16) % len(spare)]


def _lane_order(pair: str) -> tuple[int, str]:
    order = list(LANE_PAIR_COLORS)
    return (order.index(pair) if pair in order else len(order), pair)


def miss_trend(daily: pl.DataFrame, outcomes: Sequence[str] = tuple(OUTCOME_COLORS)) -> Chart:
    """Misses per UTC day (per week or month on a long window), stacked by outcome.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> daily = pl.DataFrame({"day": [dt.date(2026, 7, 1)], "abstain": [2],
        ...                       "missing_evidence": [1]})
        >>> miss_trend(daily).alt
        'Recall misses per day (UTC): 1 bar from 2026-07-01 to 2026-07-01, 3 in all, the highest 3 (2026-07-01); abstain 2, missing_evidence 1'
    """
    return time_bar_chart(daily.select("day", *outcomes),
                          [(o, o, OUTCOME_COLORS[o]) for o in outcomes],
                          title="Recall misses per {unit} (UTC)")


def top_terms(terms: pl.DataFrame, n: int = 15,
              outcomes: Sequence[str] = tuple(OUTCOME_COLORS)) -> Chart:
    """The ``n`` most-missed terms as horizontal bars stacked by outcome; a recurring
    term's label ends in ``↻`` (missed on two days or more)."""
    top = terms.head(n)
    recurring = (top.get_column("recurring").to_list() if "recurring" in top.columns
                 else [False] * top.height)
    names = [label(t, 26) + (" ↻" if r else "")
             for t, r in zip(top.get_column("term").to_list() if top.height else [], recurring,
                             strict=True)]
    return hbar_chart(names, [(o, top.get_column(o).to_list() if top.height else [],
                               OUTCOME_COLORS[o]) for o in outcomes],
                      title=f"Top {top.height} missed terms",
                      subtitle="↻ missed on two days or more" if any(recurring) else "")


def lane_overrides(lane_daily: pl.DataFrame) -> Chart:
    """Lane overrides per UTC day (or week, month), stacked by ``forced->auto_pick`` pair."""
    pairs = (lane_daily.select("forced", "auto_pick").unique().rows()
             if lane_daily.height else [])
    names = sorted((f"{forced}->{auto}" for forced, auto in pairs), key=_lane_order)
    wide = (lane_daily.with_columns((pl.col("forced") + "->" + pl.col("auto_pick")).alias("pair"))
            .pivot(on="pair", index="day", values="overrides", aggregate_function="sum")
            .fill_null(0) if lane_daily.height else pl.DataFrame({"day": []}, {"day": pl.Date}))
    return time_bar_chart(wide.select("day", *names),
                          [(name, name, lane_color(name)) for name in names],
                          title="Lane overrides per {unit} (UTC, forced->auto)")


def recall_ranks(ranked: pl.DataFrame) -> Chart:
    """Recall counts by rank (``recall_count`` in rank order, with ``id``) on a log axis,
    and the share of recalls the top tenth holds."""
    counts = [int(v) for v in ranked.get_column("recall_count").to_list()]
    total = sum(counts)
    head = sum(counts[:max(1, len(counts) // 10)])
    share = (f"top 10% of recalled capsules hold {100 * head / total:.0f}% of recalls"
             if total else "no capsule was ever recalled")
    first = ranked.get_column("id").head(1).to_list()
    return rank_chart(counts, title="Recall distribution (live capsules)", subtitle=share,
                      unit="recalls", first_name=f"rank 1: {first[0]}" if first else "")
