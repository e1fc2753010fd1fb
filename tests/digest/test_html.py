"""HTML rendering escapes every piece of stored text."""

from __future__ import annotations

import html
import re

from conftest import T0, put

import memframe as mf

SCRIPT = "<script>alert('x')</script>"
BREAKOUT = '" onmouseover="alert(1)" x="'
CONTROL = "bell\x07 esc\x1b[31m rlo\u202e nul\x00"


def rendered(store, **kwargs):
    return mf.digest(store, now=T0, **kwargs)._repr_html_()


def assert_inert(text: str):
    assert "<script" not in text.lower()
    assert "onmouseover=\"" not in text and "x=\"" not in text
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


def test_sections_render_as_tables(store):
    a = put(store, "alpha")
    b = put(store, "beta")
    store.relate(a, b, "blocks")
    out = rendered(store)
    for caption in ("by_project", "newest", "dag: ready", "dag: blocked", "tiers", "journal"):
        assert f"<h4>{caption}" in out
    assert out.count("<table>") >= 6


def test_unchanged_digest_renders_a_stub(store):
    put(store, "alpha")
    first = mf.digest(store, now=T0)
    again = mf.digest(store, now=T0, known_hash=first.hash)
    assert "unchanged" in again._repr_html_() and "alpha" not in again._repr_html_()
