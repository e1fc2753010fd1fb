"""HTML rendering escapes every piece of stored text."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from conftest import T0, put

import memframe as mf

SCRIPT = "<script>alert('x')</script>"
BREAKOUT = '" onmouseover="alert(1)" x="'
CONTROL = "bell\x07 esc\x1b[31m rlo\u202e nul\x00"


def rendered(store, **kwargs):
    return mf.digest(store, now=T0, **kwargs)._repr_html_()


class _Attributes(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.names: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.names.update(name for name, _value in attrs)


def assert_inert(text: str):
    assert "<script" not in text.lower()
    # the breakout never becomes markup: no element gains its attributes (the page's own
    # attributes, tabindex="0" among them, may end in x=")
    parser = _Attributes()
    parser.feed(text)
    assert not parser.names & {"onmouseover", "x"}, parser.names
    assert "onmouseover=\"" not in text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f\u202e]", text)


def test_hostile_content_project_and_terms_are_escaped(store):
    hostile_project = f"proj{SCRIPT}"
    put(store, f"{SCRIPT}{BREAKOUT}", project=hostile_project)
    put(store, f"ACTIVE({SCRIPT}): {CONTROL}", project=BREAKOUT.strip())
    store.record_miss([f"{SCRIPT} {CONTROL}"], "abstain")
    store.record_git_scan(f"git:/{SCRIPT}", BREAKOUT, [])
    sid = store.session_start(hostile_project)
    out = rendered(store)
    assert_inert(out)
    assert html.escape(SCRIPT, quote=True) in out
    assert "&quot; onmouseover=&quot;alert(1)&quot;" in out
    assert "\\u001b" in out and "\\u202e" in out and "\\u0007" in out
    assert sid in out


def test_escaping_also_covers_the_prefix_in_the_title(store):
    prefix = f"p{SCRIPT}"
    put(store, "x", project=prefix)
    out = rendered(store, project_prefix=prefix)
    assert_inert(out)
    assert "&lt;script&gt;" in out


def test_sections_render_scannably(store):
    a = put(store, "alpha")
    b = put(store, "beta")
    store.relate(a, b, "blocks")
    d = mf.digest(store, now=T0)
    out = d._repr_html_()
    for title in ("By project", "Newest", "Open sessions", "Blocks-DAG", "Tiers and journal"):
        assert f"<h2>{title}" in out
    assert "<h3>ready (1)</h3>" in out and "<h3>blocked (1)</h3>" in out
    # ids sit in no-wrap cells or chips; instants in the one format
    assert f'<td class="mf-id">{a}</td>' in out and f'<li class="mf-id">{a}</li>' in out
    created = d.to_dict()["newest"][0]["created_at"]
    # the date and the time each kept whole (they wrap between, never inside)
    shown = f"<span>{created[:10]}</span> <span>{created[11:19]}Z</span>"
    assert f'datetime="{created}"' in out and f">{shown}</time>" in out
    # the headline numbers are cards
    assert f'<b>{d.to_dict()["total"]}</b><span title="capsules">capsules</span>' in out


def test_a_section_without_a_layout_still_shows(store):
    from memframe._render import digest_html

    put(store, "alpha")
    body = mf.digest(store, now=T0).to_dict()
    body["pins"] = [{"id": "cap-1", "headline": "<b>pinned</b>"}]
    body["future_section"] = {"total": 3, "ids": ["cap-9"]}
    out = digest_html(body, generation=1, digest_hash="0" * 64)
    assert "<h2>pins" in out and "&lt;b&gt;pinned&lt;/b&gt;" in out
    assert "<h2>future_section" in out and "cap-9" in out


def test_the_page_is_self_contained(store):
    put(store, "alpha")
    page = mf.digest(store, now=T0).to_html()
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert "<script" not in page and "http" not in page.replace("http-equiv", "")


def test_unchanged_digest_renders_a_stub(store):
    put(store, "alpha")
    first = mf.digest(store, now=T0)
    again = mf.digest(store, now=T0, known_hash=first.hash)
    assert "unchanged" in again._repr_html_() and "alpha" not in again._repr_html_()
