"""Every chart memframe draws, as SVG: no script, no external reference, alt text on each.

One renderer for the audit page, ``MissAudit._repr_html_`` and the notebook pictures of
:mod:`memframe.display`, on the base install. Each drawing function takes plain frames and
values and returns a :class:`Chart`: a standalone SVG document (``.svg``), its alt text
(``.alt``, the figures in words) and notebook reprs.

Colours: data marks keep fixed colours that read on light and dark backgrounds; text, grid
and the background are CSS variables (the stylesheet's ``--mf-*``, so a page or a dark
notebook theme restyles them), with a light and a dark fallback chosen by
``prefers-color-scheme`` when the SVG is shown on its own (an ``<img>``, a file).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import polars as pl

from memframe._render.html import esc, fragment, label
from memframe._scalars import as_date, as_float, as_int

__all__ = ["Chart", "ticks", "log_ticks", "time_bins", "bar_chart", "time_bar_chart",
           "hbar_chart", "rank_chart", "graph_chart"]

_XMLNS = ' xmlns="http://www.w3.org/2000/svg"'
_FONT = 'font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"'
# (class, property, light fallback, dark fallback, stylesheet variable)
_PALETTE = (
    ("mfc-bg", "fill", "#ffffff", "#0d1117", "--mf-bg"),
    ("mfc-ttl", "fill", "#1f2328", "#e6edf3", "--mf-fg"),
    ("mfc-lbl", "fill", "#3d444d", "#c9d1d9", "--mf-fg2"),
    ("mfc-val", "fill", "#59636e", "#9198a1", "--mf-muted"),
    ("mfc-grid", "stroke", "#d8dee4", "#3d444d", "--mf-line"),
    ("mfc-axis", "stroke", "#59636e", "#9198a1", "--mf-muted"),
)
_STYLE = (
    "<style>"
    + "".join(f".{c}{{{p}:var({v},{light})}}" for c, p, light, _, v in _PALETTE)
    + "@media (prefers-color-scheme:dark){"
    + "".join(f".{c}{{{p}:var({v},{dark})}}" for c, p, _, dark, v in _PALETTE)
    + "}</style>"
)
# presentation attributes too, so a copy whose <style> was stripped still draws (light)
_ATTR = {c: f'class="{c}" {p}="{light}"' for c, p, light, _, _ in _PALETTE}
_TTL, _LBL, _VAL = _ATTR["mfc-ttl"], _ATTR["mfc-lbl"], _ATTR["mfc-val"]
_GRID, _AXIS = _ATTR["mfc-grid"], _ATTR["mfc-axis"]
_MIN_SLOT = 6  # px per bar on a time axis; fewer and the series is binned coarser


@dataclass(frozen=True)
class Chart:
    """One picture: a standalone SVG document and its alt text.

    In a notebook it shows itself (``_repr_html_``: inline, styled by the notebook's theme;
    ``_repr_svg_``: the standalone document). Write ``chart.svg`` to a ``.svg`` file to keep
    it.

    Examples:
        >>> c = bar_chart(["a"], [("n", [3], "#4c78a8")], title="t")
        >>> c.svg.startswith("<svg") and 'role="img"' in c.svg and c.alt in c.svg
        True
    """

    svg: str
    alt: str
    title: str

    @property
    def inline(self) -> str:
        """The SVG for inline HTML (no XML namespace: the page supplies it)."""
        return self.svg.replace(_XMLNS, "", 1)

    def _repr_svg_(self) -> str:
        return self.svg

    def _repr_html_(self) -> str:
        return fragment(self.inline)

    def __repr__(self) -> str:
        return f"<memframe Chart: {self.alt}>"


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _document(width: float, height: float, alt: str, title: str, subtitle: str,
              legend: Sequence[tuple[str, str]], body: Sequence[str]) -> Chart:
    """The SVG shell: alt text (``role="img"``, ``aria-label``, ``<title>``), the style, a
    background, the title, an optional subtitle and legend, then ``body``."""
    w, h = _num(width), _num(height)
    head = [f'<text x="10" y="17" font-size="13" font-weight="600" {_TTL}>{esc(title)}</text>']
    y = 34
    if subtitle:
        head.append(f'<text x="10" y="{y}" {_VAL}>{esc(subtitle)}</text>')
        y += 17
    x = 10.0
    for name, colour in legend:
        head.append(f'<rect x="{_num(x)}" y="{y - 9}" width="10" height="10" fill="{colour}"/>'
                    f'<text x="{_num(x + 14)}" y="{y}" {_LBL}>{esc(name)}</text>')
        x += 26 + 6.5 * len(name)
    svg = (f'<svg{_XMLNS} width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
           f'aria-label="{esc(alt)}" class="mf-chart" {_FONT} font-size="11">'
           f"<title>{esc(alt)}</title>{_STYLE}"
           f'<rect width="100%" height="100%" {_ATTR["mfc-bg"]}/>'
           + "".join(head) + "".join(body) + "</svg>")
    return Chart(svg=svg, alt=alt, title=title)


def _top_of_header(subtitle: str, legend: Collection[object]) -> int:
    return 30 + (17 if subtitle else 0) + (17 if legend else 0)


def ticks(top: int, most: int = 5) -> list[int]:
    """Whole-number axis ticks from 0 past ``top``: steps of 1, 2 or 5 times a power of
    ten, at most ``most`` + 1 of them.

    Examples:
        >>> ticks(7), ticks(38), ticks(1), ticks(0)
        ([0, 2, 4, 6, 8], [0, 10, 20, 30, 40], [0, 1], [0, 1])
    """
    top = max(int(top), 1)
    power = 1
    while True:
        for unit in (1, 2, 5):
            step = unit * power
            if math.ceil(top / step) <= most:
                return [step * i for i in range(math.ceil(top / step) + 1)]
        power *= 10


def log_ticks(top: int) -> list[int]:
    """Powers of ten from 1 past ``top`` (a log axis).

    Examples:
        >>> log_ticks(57), log_ticks(1), log_ticks(100)
        ([1, 10, 100], [1, 10], [1, 10, 100])
    """
    out = [1, 10]
    while out[-1] < top:
        out.append(out[-1] * 10)
    return out


def _totals_text(series: Sequence[tuple[str, Sequence[int], str]]) -> str:
    return ", ".join(f"{name} {sum(int(v) for v in values):,}" for name, values, _ in series)


def _describe(title: str, categories: Sequence[str], totals: Sequence[int],
              series: Sequence[tuple[str, Sequence[int], str]]) -> str:
    """A bar chart's alt text: what it shows and its figures, for a reader who cannot see it."""
    if not categories:
        return f"{title}: no data"
    peak = max(range(len(totals)), key=lambda i: totals[i])
    bars = f"{len(categories):,} bar" + ("s" if len(categories) != 1 else "")
    text = (f"{title}: {bars} from {label(categories[0], 40)} to "
            f"{label(categories[-1], 40)}, {sum(totals):,} in all, the highest "
            f"{totals[peak]:,} ({label(categories[peak], 40)})")
    if len(series) > 1:
        text += f"; {_totals_text(series)}"
    return text


def bar_chart(categories: Sequence[str], series: Sequence[tuple[str, Sequence[int], str]], *,
              title: str, tick_labels: Sequence[str] | None = None, subtitle: str = "",
              width: int = 640, height: int = 260) -> Chart:
    """Vertical bars stacked by series, with a labelled count axis.

    Args:
        categories: one name per bar (stored text is fine: it is escaped); it names the
            bar in its tooltip and in the alt text.
        series: ``(name, values, colour)`` stacked in order; ``values`` align with
            ``categories``.
        title: the chart's title (escaped).
        tick_labels: what to write under the bars (default: the categories), at least 70 px
            apart.
        subtitle: a line under the title.
        width, height: the size in pixels.

    Examples:
        >>> c = bar_chart(["a<b", "c"], [("misses", [2, 1], "#4c78a8")], title="t")
        >>> "a&lt;b" in c.svg and "<script" not in c.svg
        True
        >>> c.alt
        't: 2 bars from a<b to c, 3 in all, the highest 2 (a<b)'
    """
    n = len(categories)
    totals = [sum(int(values[i]) for _, values, _ in series) for i in range(n)]
    scale = ticks(max(totals, default=0))
    top_value = scale[-1]
    # room for the tick labels on the left and half a date label on either side
    left = max(38, 14 + 7 * len(f"{top_value:,}"))
    head = _top_of_header(subtitle, series)
    plot_w, plot_h = width - left - 36, height - head - 26
    base = head + plot_h
    parts: list[str] = []
    for tick in scale:  # a labelled gridline per tick
        y = base - plot_h * tick / top_value
        parts.append(f'<line x1="{left}" y1="{_num(y)}" x2="{left + plot_w}" y2="{_num(y)}" '
                     f'{_GRID}/><text x="{left - 5}" y="{_num(y + 4)}" text-anchor="end" '
                     f'{_VAL}>{tick:,}</text>')
    step = plot_w / max(n, 1)
    bar = step * 0.8 if step >= 4 else step
    names = list(tick_labels) if tick_labels is not None else list(categories)
    every = max(1, math.ceil(70 / step))
    for i, cat in enumerate(categories):
        x = left + i * step + (step - bar) / 2
        y = float(base)
        for name, values, colour in series:
            h = plot_h * int(values[i]) / top_value
            if h > 0:
                y -= h
                parts.append(f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(bar)}" '
                             f'height="{_num(h)}" fill="{colour}"><title>{esc(label(cat, 80))}: '
                             f"{esc(name)} {int(values[i]):,}</title></rect>")
        if i % every == 0:
            parts.append(f'<line x1="{_num(x + bar / 2)}" y1="{base}" x2="{_num(x + bar / 2)}" '
                         f'y2="{base + 4}" {_AXIS}/><text x="{_num(x + bar / 2)}" '
                         f'y="{base + 16}" text-anchor="middle" {_LBL}>'
                         f"{esc(label(names[i], 14))}</text>")
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" {_AXIS}/>')
    return _document(width, height, _describe(title, categories, totals, series), title,
                     subtitle, [(name, colour) for name, _, colour in series], parts)


def time_bins(frame: pl.DataFrame, columns: Sequence[str], *, slots: int) -> tuple[pl.DataFrame,
                                                                                    str]:
    """Counts per UTC day, with quiet days filled in, summed per week (from each Monday) or
    per month when there are more days than ``slots`` (bars would be hairlines).

    Returns the binned frame (``day`` = the first day of each bin, sorted) and the unit:
    ``"day"``, ``"week"`` or ``"month"``.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> f = pl.DataFrame({"day": [dt.date(2026, 1, 5), dt.date(2026, 3, 1)], "n": [1, 2]})
        >>> binned, unit = time_bins(f, ["n"], slots=20)
        >>> unit, binned.height, binned.get_column("n").sum()
        ('week', 8, 3)
    """
    if frame.height == 0:
        return frame.select("day", *columns), "day"
    days = pl.DataFrame({"day": pl.date_range(as_date(frame.get_column("day").min()),
                                              as_date(frame.get_column("day").max()), "1d",
                                              eager=True)})
    per_day = (days.join(frame.group_by("day").agg(pl.col(list(columns)).sum()), on="day",
                         how="left")
               .with_columns(pl.col(list(columns)).fill_null(0)).sort("day"))
    if per_day.height <= slots:
        return per_day, "day"
    for unit, every in (("week", "1w"), ("month", "1mo")):
        binned = (per_day.group_by(pl.col("day").dt.truncate(every))
                  .agg(pl.col(list(columns)).sum()).sort("day"))
        if binned.height <= slots or unit == "month":
            return binned, unit
    raise AssertionError("unreachable")  # pragma: no cover


def time_bar_chart(frame: pl.DataFrame, series: Sequence[tuple[str, str, str]], *, title: str,
                   width: int = 640, height: int = 260) -> Chart:
    """Counts over time as stacked bars: a bar per day, or per week or month when a daily
    bar would be narrower than a few pixels (the title says which).

    Args:
        frame: a ``day`` (Date) column and one count column per series.
        series: ``(column, legend name, colour)`` stacked in order.
        title: the chart's title; ``{unit}`` in it becomes ``day``, ``week`` or ``month``.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> days = [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in range(366)]
        >>> f = pl.DataFrame({"day": days, "n": [1] * 366})
        >>> c = time_bar_chart(f, [("n", "misses", "#4c78a8")], title="misses per {unit}")
        >>> c.title, c.alt.split(":")[1]
        ('misses per week', ' 53 bars from week of 2025-12-29 to week of 2026-12-28, 366 in all, the highest 7 (week of 2026-01-05)')
    """
    columns = [column for column, _, _ in series]
    binned, unit = time_bins(frame, columns, slots=int((width - 60) / _MIN_SLOT))
    days: list[dt.date] = binned.get_column("day").to_list()
    if unit == "day":
        names = [d.isoformat() for d in days]
        ticks_text = names
    elif unit == "week":
        names = [f"week of {d.isoformat()}" for d in days]
        ticks_text = [d.isoformat() for d in days]
    else:
        names = ticks_text = [d.strftime("%Y-%m") for d in days]
    return bar_chart(names, [(name, binned.get_column(column).to_list(), colour)
                             for column, name, colour in series],
                     title=title.format(unit=unit), tick_labels=ticks_text, width=width,
                     height=height)


def hbar_chart(categories: Sequence[str], series: Sequence[tuple[str, Sequence[int], str]], *,
               title: str, subtitle: str = "", width: int = 640) -> Chart:
    """Horizontal bars stacked by series, one row per category (a ranking), with a
    labelled count axis and each row's total at its end.

    Examples:
        >>> c = hbar_chart(["x", "y"], [("a", [2, 0], "#111"), ("b", [2, 1], "#222")],
        ...                title="t", width=400)
        >>> c.svg.count('<rect x="180"')  # each row starts at the axis
        2
    """
    n = len(categories)
    totals = [sum(int(values[i]) for _, values, _ in series) for i in range(n)]
    scale = ticks(max(totals, default=0))
    top_value = scale[-1]
    row, gap, left = 16, 5, 180
    head = _top_of_header(subtitle, series) + 4
    plot_w = width - left - 40
    plot_h = n * (row + gap)
    height = head + plot_h + 24
    parts: list[str] = []
    for tick in scale:
        x = left + plot_w * tick / top_value
        parts.append(f'<line x1="{_num(x)}" y1="{head - 2}" x2="{_num(x)}" '
                     f'y2="{head + plot_h}" {_GRID}/><text x="{_num(x)}" '
                     f'y="{head + plot_h + 14}" text-anchor="middle" {_VAL}>{tick:,}</text>')
    for i, cat in enumerate(categories):
        y = head + i * (row + gap)
        parts.append(f'<text x="{left - 6}" y="{y + row - 4}" text-anchor="end" {_LBL}>'
                     f"{esc(label(cat, 28))}</text>")
        x = float(left)
        for name, values, colour in series:
            w = plot_w * int(values[i]) / top_value
            if w > 0:
                parts.append(f'<rect x="{_num(x)}" y="{y}" width="{_num(w)}" height="{row}" '
                             f'fill="{colour}"><title>{esc(label(cat, 80))}: {esc(name)} '
                             f"{int(values[i]):,}</title></rect>")
            x += w
        parts.append(f'<text x="{_num(x + 4)}" y="{y + row - 4}" {_VAL}>{totals[i]:,}</text>')
    parts.append(f'<line x1="{left}" y1="{head - 2}" x2="{left}" y2="{head + plot_h}" '
                 f"{_AXIS}/>")
    return _document(width, height, _describe(title, categories, totals, series), title,
                     subtitle, [(name, colour) for name, _, colour in series], parts)


def rank_chart(values: Sequence[int], *, title: str, subtitle: str, unit: str,
               first_name: str = "", colour: str = "#4c78a8", width: int = 640,
               height: int = 280) -> Chart:
    """Counts by rank (highest first) as a step line on a log axis: a head and its tail.

    Examples:
        >>> c = rank_chart([9, 3, 1], title="t", subtitle="s", unit="recalls")
        >>> c.alt
        't: 3 ranks, from 9 recalls (rank 1) down to 1; 13 in all. s'
    """
    n = len(values)
    if n == 0:
        return _document(width, 80, f"{title}: no data", title, subtitle, [], [])
    scale = log_ticks(max(values))
    top_log = math.log10(scale[-1])
    left = 14 + 7 * len(f"{scale[-1]:,}")
    head = _top_of_header(subtitle, [])
    plot_w, plot_h = width - left - 16, height - head - 40
    base = head + plot_h

    def y_of(v: int) -> float:
        return base - plot_h * math.log10(max(v, 1)) / top_log

    def x_of(rank: float) -> float:
        return left + plot_w * (rank - 1) / max(n, 1)

    parts: list[str] = []
    for tick in scale:
        y = y_of(tick)
        parts.append(f'<line x1="{left}" y1="{_num(y)}" x2="{left + plot_w}" y2="{_num(y)}" '
                     f'{_GRID}/><text x="{left - 5}" y="{_num(y + 4)}" text-anchor="end" '
                     f'{_VAL}>{tick:,}</text>')
    for tick in ticks(n):
        if 1 <= tick <= n or tick == 0:
            x = x_of(max(tick, 1))
            parts.append(f'<line x1="{_num(x)}" y1="{base}" x2="{_num(x)}" y2="{base + 4}" '
                         f'{_AXIS}/><text x="{_num(x)}" y="{base + 16}" text-anchor="middle" '
                         f"{_VAL}>{max(tick, 1):,}</text>")
    path = [f"M{_num(x_of(1))},{_num(y_of(values[0]))}"]
    for i, v in enumerate(values[1:], start=2):
        path.append(f"H{_num(x_of(i))}V{_num(y_of(v))}")
    path.append(f"H{_num(x_of(n + 1))}")
    parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="2">'
                 f"<title>{esc(first_name)}</title></path>")
    parts.append(f'<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" {_AXIS}/>'
                 f'<text x="{left + plot_w / 2}" y="{base + 32}" text-anchor="middle" {_LBL}>'
                 f"rank (most first); {esc(unit)} on a log scale</text>")
    alt = (f"{title}: {n:,} ranks, from {values[0]:,} {unit} (rank 1) down to "
           f"{values[-1]:,}; {sum(values):,} in all. {subtitle}")
    return _document(width, height, alt, title, subtitle, [], parts)


def graph_chart(nodes: pl.DataFrame, edges: pl.DataFrame, colors: Mapping[str, str], *,
                title: str, alt: str) -> Chart:
    """A layered node-link picture: each node at (``layer``, ``position``), coloured by
    ``status``, its id above it and its id, status, kind and headline in its tooltip; an
    edge is solid when ``live``, dashed otherwise.

    Args:
        nodes: ``id``, ``status``, ``layer``, ``position``, ``headline``, ``kind``.
        edges: ``x``, ``y``, ``x2``, ``y2`` (layer and position of both ends), ``live``.
        colors: status -> colour, in legend order.
        title: the chart's title; alt: its alt text.

    Examples:
        >>> import polars as pl
        >>> nodes = pl.DataFrame({"id": ["a", "<b>"], "status": ["ready", "done"],
        ...                       "layer": [0, 1], "position": [0.0, 0.0],
        ...                       "headline": ["x", "y"], "kind": [None, None]})
        >>> edges = pl.DataFrame({"x": [0], "y": [0.0], "x2": [1], "y2": [0.0], "live": [True]})
        >>> c = graph_chart(nodes, edges, {"ready": "#0a0", "done": "#999"}, title="g",
        ...                 alt="g: 2 nodes")
        >>> c.svg.count("<circle"), "&lt;b&gt;" in c.svg
        (2, True)
    """
    col_w, row_h, pad, r = 150, 34, 40, 7
    head = _top_of_header("", colors) + 20
    layers = as_int(nodes.get_column("layer").max() or 0) if nodes.height else 0
    rows = as_float(nodes.get_column("position").max() or 0) if nodes.height else 0.0
    legend_w = sum(26 + 6.5 * len(name) for name in colors)
    width = max(320, pad * 2 + col_w * layers + 120, 7.2 * len(title) + 20, legend_w + 20)
    height = head + row_h * rows + 30

    def at(layer: float, position: float) -> tuple[str, str]:
        return _num(pad + col_w * layer), _num(head + row_h * position)

    parts: list[str] = []
    for x, y, x2, y2, live in edges.select("x", "y", "x2", "y2", "live").iter_rows():
        (ax, ay), (bx, by) = at(x, y), at(x2, y2)
        dash = "" if live else ' stroke-dasharray="4 3"'
        parts.append(f'<line x1="{ax}" y1="{ay}" x2="{bx}" y2="{by}" {_AXIS} '
                     f'stroke-width="1.2"{dash}/>')
    for node, status, layer, position, headline, kind in nodes.select(
            "id", "status", "layer", "position", "headline", "kind").iter_rows():
        x, y = at(layer, position)
        tip = f"{label(node, 60)} · {status}" + (f" · {label(kind, 20)}" if kind else "") \
            + (f": {label(headline, 80)}" if headline else "")
        parts.append(f'<circle cx="{x}" cy="{y}" r="{r}" fill="{colors.get(status, "#9d9d9d")}">'
                     f"<title>{esc(tip)}</title></circle>"
                     f'<text x="{x}" y="{_num(float(y) - r - 4)}" text-anchor="middle" '
                     f'font-size="10" {_LBL}>{esc(label(node, 24))}</text>')
    return _document(width, height, alt, title, "", list(colors.items()), parts)
