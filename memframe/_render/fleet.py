"""The fleet frame as a terminal table and as an HTML overview (``memframe.fleet.Fleet``).

Paths and error texts are stored text: the terminal table shows them through
:func:`memframe._render.terminal.visible`, the HTML through :func:`memframe._render.html.esc`.
"""

from __future__ import annotations

import datetime
from typing import Any

import polars as pl

from memframe._render.html import cards, esc, fragment, html_table, page
from memframe._render.terminal import columns, cut, visible
from memframe._render.text import plural

__all__ = ["fleet_text", "fleet_html", "age_text"]

_FLAGS = (("stale_handoff", "S"), ("broken_chain", "B"), ("orphaned_sessions", "O"))


def age_text(value: datetime.timedelta | None) -> str:
    """An age in its largest whole unit: ``45s``, ``12m``, ``3h``, ``12d``.

    Examples:
        >>> age_text(datetime.timedelta(days=12, hours=5)), age_text(datetime.timedelta(seconds=59))
        ('12d', '59s')
        >>> age_text(None), age_text(-datetime.timedelta(hours=2))
        ('', '-2h')
    """
    if value is None:
        return ""
    sign, seconds = ("-", -value.total_seconds()) if value < datetime.timedelta(0) else (
        "", value.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{sign}{int(seconds // size)}{unit}"
    return f"{sign}{int(seconds)}s"


def _span(value: datetime.timedelta) -> str:
    return age_text(value) or "0s"


def _when(now: datetime.datetime) -> str:
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _legend(stale_after: datetime.timedelta, orphan_after: datetime.timedelta) -> str:
    return (f"flags: S handoff older than {_span(stale_after)} · B broken chain · "
            f"O session open over {_span(orphan_after)}")


def _flags(row: dict[str, Any]) -> str:
    return "".join(mark for name, mark in _FLAGS if row.get(name))


def _path_cell(path: str, width: int) -> str:
    """A path cut at its start (its end names the store), padded to ``width`` columns.

    Examples:
        >>> _path_cell("/srv/agents/team-a/a17", 12)
        '…/team-a/a17'
    """
    text = visible(path)
    if columns(text) > width:
        tail = ""
        for ch in reversed(text):
            if columns(ch + tail) > width - 1:
                break
            tail = ch + tail
        text = "…" + tail
    return text + " " * max(0, width - columns(text))


#: (header, column, width) of the numeric columns, right-aligned
_NUMBERS = (("gen", "generation", 6), ("total", "total", 9), ("live", "live", 9),
            ("handoff", "handoff_age", 7), ("open", "open_sessions", 5), ("chain", "chain", 7),
            ("flag", "flags", 4))


def _cells(row: dict[str, Any]) -> dict[str, str]:
    number = lambda v: "" if v is None else f"{v:,}"  # noqa: E731
    chain = "ok" if row["chain_ok"] else f"#{row['broken_seq']}" if row["chain_ok"] is not None else ""
    return {"generation": number(row["generation"]), "total": number(row["total"]),
            "live": number(row["live"]), "handoff_age": age_text(row["handoff_age"]),
            "open_sessions": number(row["open_sessions"]), "chain": chain,
            "flags": _flags(row)}


def fleet_text(frame: pl.DataFrame, *, now: datetime.datetime,
               stale_after: datetime.timedelta, orphan_after: datetime.timedelta,
               width: int = 80) -> str:
    """The fleet frame as a terminal table at most ``width`` columns wide.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> now = dt.datetime(2026, 9, 1, tzinfo=dt.UTC)
        >>> frame = pl.DataFrame([{"path": "/agents/a", "generation": 12, "total": 1200,
        ...     "live": 1100, "handoff_age": dt.timedelta(days=9), "open_sessions": 2,
        ...     "chain_ok": False, "broken_seq": 7, "stale_handoff": True,
        ...     "broken_chain": True, "orphaned_sessions": False, "error": None}])
        >>> print(fleet_text(frame, now=now, stale_after=dt.timedelta(days=7),
        ...                  orphan_after=dt.timedelta(days=1), width=60))
        memframe fleet: 1 store at 2026-09-01T00:00:00Z · 0 failed · 1 flagged
        store           gen     total      live handoff  open   chain flag
        /agents/a        12     1,200     1,100      9d     2      #7   SB
        flags: S handoff older than 7d · B broken chain · O session open over 1d
    """
    rows = frame.to_dicts()
    failed = sum(1 for r in rows if r["error"] is not None)
    flagged = sum(1 for r in rows if _flags(r))
    lines = [f"memframe fleet: {plural(len(rows), 'store')} at {_when(now)} · "
             f"{failed:,} failed · {flagged:,} flagged"]
    fixed = sum(w + 1 for _, _, w in _NUMBERS)
    store_width = max(12, width - fixed)
    lines.append(_path_cell("store", store_width)
                 + "".join(f" {h:>{w}}" for h, _, w in _NUMBERS))
    for row in rows:
        head = _path_cell(row["path"], store_width)
        if row["error"] is not None:
            lines.append(cut(f"{head} {visible(row['error'])}", width))
            continue
        cells = _cells(row)
        lines.append(head + "".join(f" {cells[c]:>{w}}" for _, c, w in _NUMBERS))
    lines.append(_legend(stale_after, orphan_after))
    return "\n".join(lines)


def _age_words(name: str) -> pl.Expr:
    """`age_text` as an expression over a Duration column."""
    seconds = pl.col(name).dt.total_seconds()
    size = seconds.abs()
    sign = pl.when(seconds < 0).then(pl.lit("-")).otherwise(pl.lit(""))
    words = pl.lit(None, dtype=pl.String)
    for unit, step in (("s", 1), ("m", 60), ("h", 3600), ("d", 86400)):
        words = pl.when(size >= step).then(
            sign + (size // step).cast(pl.String) + pl.lit(unit)).otherwise(words)
    return pl.when(size < 1).then(pl.lit("0s")).otherwise(words).alias(name)


def _shown(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame as the page shows it: ages in words, and the flags' letters beside the
    path (why a store is flagged, before its figures).

    Examples:
        >>> import datetime as dt, polars as pl
        >>> f = pl.DataFrame({"path": ["a", "b", "c"], "broken_chain": [True, False, None],
        ...                   "age": [dt.timedelta(days=3, hours=2), dt.timedelta(seconds=-90), None]})
        >>> _shown(f).rows()
        [('a', 'B', True, '3d'), ('b', '', False, '-1m'), ('c', '', None, None)]
    """
    marks = [pl.when(pl.col(name)).then(pl.lit(mark)).otherwise(pl.lit(""))
             for name, mark in _FLAGS if name in frame.columns]
    shown = frame.with_columns(
        _age_words(c) for c, t in frame.schema.items() if isinstance(t, pl.Duration))
    if not marks or "path" not in frame.columns:
        return shown
    shown = shown.with_columns(pl.concat_str(marks).alias("flags"))
    return shown.select("path", "flags", pl.exclude("path", "flags"))


def fleet_html(frame: pl.DataFrame, *, now: datetime.datetime,
               stale_after: datetime.timedelta, orphan_after: datetime.timedelta,
               as_page: bool = False) -> str:
    """The fleet as a notebook fragment, or (``as_page``) a self-contained HTML page:
    headline numbers, the flagged stores, the stores that failed, then every row.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> frame = pl.DataFrame({"path": ["<b>/a"], "total": [3], "handoff_age": [None],
        ...                       "stale_handoff": [None], "broken_chain": [None],
        ...                       "orphaned_sessions": [None], "error": ["NotAStoreError: x"]},
        ...                      schema_overrides={"handoff_age": pl.Duration("ns"),
        ...                                        "stale_handoff": pl.Boolean,
        ...                                        "broken_chain": pl.Boolean,
        ...                                        "orphaned_sessions": pl.Boolean})
        >>> html = fleet_html(frame, now=dt.datetime(2026, 9, 1, tzinfo=dt.UTC),
        ...                   stale_after=dt.timedelta(days=7), orphan_after=dt.timedelta(days=1))
        >>> "&lt;b&gt;/a" in html and "<b>/a" not in html
        True
    """
    failed = frame.filter(pl.col("error").is_not_null())
    flagged = frame.filter(pl.any_horizontal(name for name, _ in _FLAGS))
    title = f"memframe fleet: {plural(frame.height, 'store')} at {_when(now)}"
    body = [f"<h2>{esc(title)}</h2>",
            cards([("stores", frame.height), ("failed", failed.height),
                   ("flagged", flagged.height),
                   ("capsules", int(frame["total"].sum() or 0))]),
            f'<p class="mf-sub">{esc(_legend(stale_after, orphan_after))}</p>']
    if flagged.height:
        body.append(html_table(_shown(flagged.drop("error")), caption="flagged stores"))
    if failed.height:
        body.append(html_table(failed.select("path", "error"), caption="stores that failed"))
    body.append(html_table(_shown(frame), caption="every store"))
    return page(title, "".join(body)) if as_page else fragment("".join(body))
