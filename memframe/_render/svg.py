"""Small charts as inline SVG: no script, no external reference, readable on their own.

The base install draws these (the audit page's charts); altair pictures live in the
``plot`` extra (:mod:`memframe.display`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from memframe._render.html import esc, label

__all__ = ["svg_bars", "ticks"]

# Presentation attributes on every text (not only CSS classes), so an SVG copied out of the
# page on its own still renders its labels.
_FONT = 'font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"'
_LBL = f'class="lbl" {_FONT} font-size="11" fill="#333"'
_VAL = f'class="val" {_FONT} font-size="11" fill="#666"'
_TTL = f'class="ttl" {_FONT} font-size="12" font-weight="600" fill="#222"'


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


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


def _describe(title: str, categories: Sequence[str], totals: Sequence[int]) -> str:
    """The chart's alt text: what it shows and its figures, for a reader who cannot see it."""
    if not categories:
        return f"{title}: no data"
    peak = max(range(len(totals)), key=lambda i: totals[i])
    return (f"{title}: {len(categories):,} bars from {label(categories[0], 40)} to "
            f"{label(categories[-1], 40)}, {sum(totals):,} in all, the highest "
            f"{totals[peak]:,} ({label(categories[peak], 40)})")


def svg_bars(
    categories: Sequence[str],
    series: Sequence[tuple[str, Sequence[int], str]],
    *,
    title: str,
    horizontal: bool = False,
    width: int = 640,
    height: int | None = None,
) -> str:
    """A small stacked bar chart as inline SVG (no script, no external reference).

    Args:
        categories: one label per bar (stored text is fine: it is escaped).
        series: ``(name, values, colour)`` stacked in order; ``values`` align with
            ``categories``.
        title: the chart's title (escaped).
        horizontal: bars grow to the right, one row per category (for term rankings).
        width: the SVG width in pixels.
        height: the SVG height (default depends on the orientation).

    Examples:
        >>> svg = svg_bars(["a<b", "c"], [("misses", [2, 1], "#4c78a8")], title="t")
        >>> svg.startswith("<svg") and "a&lt;b" in svg and "<script" not in svg
        True
    """
    n = len(categories)
    totals = [sum(int(values[i]) for _, values, _ in series) for i in range(n)]
    scale = ticks(max(totals, default=0))
    top = scale[-1]
    parts: list[str] = []
    legend_y = 36
    if horizontal:
        bar, gap, left, head = 16, 4, 180, 48
        height = height or head + n * (bar + gap) + 24
        plot_w = width - left - 50
        for i, cat in enumerate(categories):
            y = head + i * (bar + gap)
            parts.append(f'<text x="{left - 6}" y="{y + bar - 4}" text-anchor="end" '
                         f'{_LBL}>{esc(label(cat, 28))}</text>')
            x = float(left)
            for name, values, colour in series:
                w = plot_w * int(values[i]) / top
                if w > 0:
                    parts.append(
                        f'<rect x="{_num(x)}" y="{y}" width="{_num(w)}" height="{bar}" '
                        f'fill="{colour}"><title>{esc(label(cat, 80))}: {esc(name)} '
                        f'{int(values[i])}</title></rect>')
                x += w
            parts.append(f'<text x="{_num(x + 4)}" y="{y + bar - 4}" {_VAL}>'
                         f"{totals[i]}</text>")
    else:
        left, head, foot = 40, 48, 24
        height = height or 240
        plot_w, plot_h = width - left - 30, height - head - foot
        step = plot_w / max(n, 1)
        bar = max(step * 0.8, 1.0)
        every = max(1, math.ceil(n * 70 / plot_w))  # date labels at least 70 px apart
        for tick in scale:  # a labelled gridline per tick, the axis at 0
            y = head + plot_h - plot_h * tick / top
            parts.append(f'<line x1="{left}" y1="{_num(y)}" x2="{left + plot_w}" '
                         f'y2="{_num(y)}" stroke="#888" stroke-opacity="'
                         f'{1 if tick == 0 else 0.3}"/>')
            parts.append(f'<text x="{left - 4}" y="{_num(y + 4)}" text-anchor="end" {_VAL}>'
                         f"{tick:,}</text>")
        for i, cat in enumerate(categories):
            x = left + i * step + (step - bar) / 2
            y = float(head + plot_h)
            for name, values, colour in series:
                h = plot_h * int(values[i]) / top
                if h > 0:
                    y -= h
                    parts.append(
                        f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(bar)}" '
                        f'height="{_num(h)}" fill="{colour}"><title>{esc(label(cat, 80))}: '
                        f"{esc(name)} {int(values[i])}</title></rect>")
            if i % every == 0:
                parts.append(f'<text x="{_num(x + bar / 2)}" y="{head + plot_h + 14}" '
                             f'text-anchor="middle" {_LBL}>{esc(label(cat, 12))}</text>')
    legend = []
    lx = 10
    for name, _, colour in series:
        legend.append(f'<rect x="{lx}" y="{legend_y - 9}" width="10" height="10" '
                      f'fill="{colour}"/><text x="{lx + 14}" y="{legend_y}" {_LBL}>'
                      f"{esc(name)}</text>")
        lx += 24 + 7 * len(name)
    described = _describe(title, categories, totals)
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{esc(described)}"><title>{esc(described)}</title>'
        f'<text x="10" y="16" {_TTL}>{esc(title)}'
        f"</text>{''.join(legend)}{''.join(parts)}</svg>"
    )
