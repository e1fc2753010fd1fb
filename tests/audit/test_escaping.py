"""Hostile miss terms cannot break out of any audit output."""

from __future__ import annotations

import datetime as dt
import json
from html.parser import HTMLParser

import pytest

import memframe as mf
from memframe.text import fold_terms

HOSTILE = [
    "<script>alert('x')</script>",
    '"><img src=x onerror=alert(1)>',
    "' onmouseover='alert(1)",
    "</style><script>steal()</script>",
    "<svg onload=alert(1)>",
    "ansi\x1b[31mred\x1b[0m",
    "bell\x07nul\x00end",
    "line\u2028break\u2029para\x85nel",
    "rtl\u202eevil\u202c",
    "tab\tin\x0bside",
    "&amp;&lt;entity",
    "javascript:alert(1)",
]
ALLOWED_TAGS = {"html", "head", "meta", "title", "style", "body", "div", "h2", "h3", "p",
                "table", "caption", "thead", "tbody", "tr", "th", "td", "svg", "rect", "text",
                "line", "h1", "main", "span", "b", "time", "code", "ul", "li", "figure"}
# characters that must never reach a page or a terminal raw
RAW_FORBIDDEN = [chr(c) for c in (*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0))]
RAW_FORBIDDEN += ["\u2028", "\u2029", "\u202e", "\u202c"]


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs.extend(attrs)

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture
def hostile(tmp_path):
    days = iter(dt.datetime(2026, 7, d, tzinfo=dt.UTC) for d in range(1, 28))
    store = mf.Store.create(tmp_path / "s", clock=lambda: next(days))
    store.ingest({"content": "script alerts and an img tag", "source": "note", "anchor": "a"})
    for outcome in ("abstain", "missing_evidence"):
        store.record_miss(HOSTILE, outcome)
    store.record_lane_override("vector", "term")
    return store


def _check_html(page: str, terms: list[str]) -> None:
    for ch in RAW_FORBIDDEN:
        assert ch not in page, repr(ch)
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert set(parser.tags) <= ALLOWED_TAGS, set(parser.tags) - ALLOWED_TAGS
    for name, value in parser.attrs:
        assert not name.startswith("on"), name
        assert "javascript:" not in (value or "")
    text = "".join(parser.text)
    assert "<script>alert('x')</script>" in text  # shown as text, not as markup
    assert "ansi\\u001b[31mred" in text  # control characters made visible
    assert "rtl\\u202eevil" in text
    assert len(terms) == len(HOSTILE)


def test_terms_are_stored_folded(hostile):
    stored = hostile.table("recall_misses").collect().get_column("term").unique().to_list()
    assert sorted(stored) == sorted(fold_terms(HOSTILE))


def test_html_page_and_fragment_are_inert(hostile):
    audit = mf.audit.recall_misses(hostile)
    terms = audit.terms.get_column("term").to_list()
    _check_html(audit.to_html(), terms)
    _check_html(audit._repr_html_(), terms)


def test_page_is_self_contained(hostile):
    page = mf.audit.recall_misses(hostile).to_html()
    parser = _Collector()
    parser.feed(page)
    assert "script" not in parser.tags and "link" not in parser.tags
    names = {name for name, _ in parser.attrs}
    assert not names & {"src", "href", "xlink:href", "srcset", "action"}
    for _, value in parser.attrs:
        assert "http" not in (value or "") and "url(" not in (value or "")
    style = page[page.index("<style>"):page.index("</style>")]
    assert "url(" not in style and "@import" not in style
    assert parser.tags.count("svg") == 3  # daily trend, top terms, lane overrides


def test_text_report_cannot_drive_a_terminal(hostile):
    text = mf.audit.recall_misses(hostile).to_text()
    body = text.replace("\n", "")
    for ch in RAW_FORBIDDEN:
        assert ch not in body, repr(ch)
    assert "\\u001b[31m" in text


def test_json_round_trips_the_exact_terms(hostile):
    audit = mf.audit.recall_misses(hostile)
    body = json.loads(audit.to_json())
    assert sorted(t["term"] for t in body["terms"]) == sorted(fold_terms(HOSTILE))
    for ch in RAW_FORBIDDEN[:31]:  # C0 controls are escaped by JSON itself
        assert ch not in audit.to_json()


def test_charts_show_visible_labels(hostile):
    from memframe import display

    audit = mf.audit.recall_misses(hostile)
    chart = display.top_terms_chart(audit, n=50)
    for ch in RAW_FORBIDDEN:
        assert ch not in chart.svg
    parser = _Collector()
    parser.feed(chart.svg)
    assert set(parser.tags) <= ALLOWED_TAGS, set(parser.tags) - ALLOWED_TAGS
    assert not any(name.startswith("on") for name, _ in parser.attrs)
    labels = "".join(parser.text)
    assert "\\u001b" in labels and "<script>alert('x')" in labels  # shown, not run
