"""Every HTML surface opened in a real browser (the system chromium, headless).

The digest page, the recall-miss audit page, the import report and the notebooks exported
to HTML are loaded from ``file://`` with every other request refused and recorded. Each
must make no request beyond its own file, log no console error, raise no page error, draw
every chart with a non-empty size, and (for the digest) keep every id on one line.
``.ci/run`` installs Debian's chromium; the Python driver downloads no browser. Without a
system chromium these tests skip and say how to install it; with ``CI`` set they fail.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

import memframe as mf
from memframe.synth import sample_store_path

from .test_notebooks import NOTEBOOKS, executed

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
SHOTS = os.environ.get("MEMFRAME_SCREENSHOTS")  # a folder to keep the screenshots in
# on the worker that executed the notebooks (tests/test_notebooks.py), so they run once, and
# one chromium for the module
pytestmark = pytest.mark.xdist_group("notebooks")


CHROMIUM_MISSING = ("the browser tests need the system chromium, which is not installed: "
                    "apt-get install -y chromium (Debian/Ubuntu; .ci/run does this), then run "
                    "them again")


def _chromium() -> str:
    """The system chromium. Absent, the browser tests skip and say how to install it, except
    under CI (the ``CI`` variable set), where ``.ci/run`` installs it and they are required."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the browser tests are required: {CHROMIUM_MISSING}")
        pytest.skip(CHROMIUM_MISSING)
    return found


def test_without_chromium_the_browser_tests_skip_with_how_to_install_it(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        _chromium()


def test_under_ci_a_missing_chromium_fails_never_skips(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI is set.*apt-get install -y chromium"):
        _chromium()


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="memframe-chromium-")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=_chromium(), headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1200, "height": 900}, offline=True,
        )
        yield context
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


class Visit:
    """One page load with its requests, failures and console messages recorded."""

    def __init__(self, context, path: Path, scheme: str = "light"):
        self.url = path.resolve().as_uri()
        self.requests: list[str] = []
        self.refused: list[str] = []
        self.failed: list[str] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        page = context.new_page()
        page.route("**/*", self._route)
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("requestfailed", lambda r: self.failed.append(r.url))
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.emulate_media(color_scheme=scheme)
        page.goto(self.url, wait_until="load")
        page.wait_for_timeout(300)  # late scripts and fonts, if any, would show up here
        self.page = page

    def _route(self, route):
        if route.request.url == self.url:
            route.continue_()
        else:
            self.refused.append(route.request.url)
            route.abort()

    def assert_clean(self) -> None:
        assert self.requests == [self.url], self.requests
        assert self.refused == [] and self.failed == []
        assert self.console == [] and self.errors == []

    def drawn_svgs(self, selector: str = "svg") -> list[dict]:
        return self.page.evaluate("""(selector) => [...document.querySelectorAll(selector)]
            .filter(s => !s.parentElement.closest('svg'))
            .map(s => { const r = s.getBoundingClientRect();
                        return {w: r.width, h: r.height,
                                marks: s.querySelectorAll('path, rect, circle, line').length}; })""",
            selector)

    def shot(self, name: str) -> None:
        if SHOTS:
            Path(SHOTS).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_digest_page(browser, tmp_path):
    d = mf.digest(mf.Store.open(sample_store_path()))
    visit = Visit(browser, _write(tmp_path, "digest.html", d.to_html()))
    visit.shot("digest")
    visit.assert_clean()
    page = visit.page
    assert page.title() == "memframe digest"
    # every id stays on one line, however narrow its cell
    lines = page.evaluate("""() => [...document.querySelectorAll('.mf-id')].map(e => {
        const range = document.createRange(); range.selectNodeContents(e);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        return [e.textContent, tops.size]; })""")
    assert len(lines) > 40
    assert [text for text, n in lines if n != 1] == []
    # the stylesheet applied: a sans-serif page of reasonable height, not a serif wall
    font = page.evaluate("getComputedStyle(document.querySelector('main')).fontFamily")
    assert "system-ui" in font
    height = page.evaluate("document.documentElement.scrollHeight")
    # (headlines are shown whole, wrapped in their column, so a row may take two lines;
    # an unstyled page is more than twice as tall)
    assert height < 3800, height
    width = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert width[0] <= width[1], width  # no sideways scrolling at 1200 px
    times = page.evaluate("[...document.querySelectorAll('time')].map(t => t.textContent)")
    assert times and all(len(t) == 20 and t[10] == " " and t.endswith("Z") for t in times)


def test_the_audit_page(browser, tmp_path):
    audit = mf.audit.recall_misses(mf.Store.open(sample_store_path()))
    visit = Visit(browser, _write(tmp_path, "audit.html", audit.to_html()))
    visit.shot("audit")
    visit.assert_clean()
    svgs = visit.drawn_svgs()
    assert len(svgs) == 3  # misses per day, top terms, lane overrides
    assert all(s["w"] > 200 and s["h"] > 100 and s["marks"] > 5 for s in svgs), svgs
    # every chart is an image with alt text that gives its figures
    alts = visit.page.evaluate("""() => [...document.querySelectorAll('svg')]
        .map(s => [s.getAttribute('role'), s.getAttribute('aria-label')])""")
    assert all(role == "img" and " in all, the highest " in text for role, text in alts), alts


def test_the_notebook_fragments_share_the_stylesheet(browser, tmp_path):
    store = mf.Store.open(sample_store_path())
    parts = [store._repr_html_(), mf.digest(store, headlines=3)._repr_html_(),
             store.memory.sessions(limit=3)._repr_html_(),
             mf.audit.recall_misses(store)._repr_html_()]
    html = "<!DOCTYPE html><meta charset='utf-8'><title>fragments</title>" + "".join(parts)
    visit = Visit(browser, _write(tmp_path, "fragments.html", html))
    visit.shot("fragments")
    visit.assert_clean()
    blocks = visit.page.evaluate("""() => [...document.querySelectorAll('div.mf')].map(
        d => getComputedStyle(d).fontFamily)""")
    assert len(blocks) == 4 and all("system-ui" in f for f in blocks)


@pytest.mark.parametrize("name", ["02-digest", "03-recall-miss-audit"])
def test_an_exported_notebook_draws_every_chart_offline(browser, tmp_path, name):
    from nbconvert import HTMLExporter

    nb = executed(NOTEBOOKS / f"{name}.ipynb")
    shown_tables = sum("".join(o["data"]["text/html"]).count('class="mf-table')
                       for c in nb.cells for o in c.get("outputs", [])
                       if "text/html" in o.get("data", {}))
    exporter = HTMLExporter(template_name="lab")
    exporter.mathjax_url = ""  # no formulas here; nothing to fetch
    exporter.require_js_url = ""
    body, _ = exporter.from_notebook_node(nbformat.from_dict(nb))
    visit = Visit(browser, _write(tmp_path, f"{name}.html", body))
    visit.shot(name)
    visit.assert_clean()
    svgs = ["".join(o["data"]["image/svg+xml"]) for c in nb.cells for o in c.get("outputs", [])
            if "image/svg+xml" in o.get("data", {})]
    charts = len(svgs)
    # alt text on every picture: the SVG says it is an image and what it shows
    assert all(' role="img" aria-label="' in s and "<title>" in s for s in svgs)
    assert charts == {"02-digest": 2, "03-recall-miss-audit": 4}[name]
    # under nbconvert's stylesheet (which right-aligns every cell) memframe's text cells
    # stay left-aligned under their left-aligned headers; numbers stay right
    aligned = _alignments(visit)
    assert shown_tables > 0 and len(aligned) > 20
    assert [a for a in aligned if a["align"] != a["want"]] == []
    # the export shows each chart in its HTML form: inline, styled by the page's theme,
    # every one drawn with a real size and its marks
    # (the audit's own HTML repr draws its charts with the same code, so they count too)
    drawn = visit.drawn_svgs("svg.mf-chart")
    inline = sum("".join(o["data"]["text/html"]).count('class="mf-chart"')
                 for c in nb.cells for o in c.get("outputs", []) if "text/html" in o.get("data", {}))
    assert len(drawn) == inline >= charts
    assert all(s["w"] > 150 and s["h"] > 100 and s["marks"] > 3 for s in drawn), drawn
    # the standalone SVG (what a frontend without HTML shows) decodes as an image too
    first = svgs[0]
    loaded = visit.page.evaluate("""(svg) => new Promise(done => {
        const img = new Image(); img.onload = () => done([img.naturalWidth, img.naturalHeight]);
        img.onerror = () => done(null);
        img.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(svg); })""", first)
    assert loaded and loaded[0] > 150 and loaded[1] > 100, loaded


# every text's colour against the background it is drawn on (the nearest ancestor with one,
# else the canvas of the scheme), as the WCAG contrast ratio
_CONTRAST = """(canvas) => {
    const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
    const lum = ([r, g, b]) => {
        const f = c => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
        return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const over = (fg, bg) => fg.length > 3 && fg[3] < 1
        ? [0, 1, 2].map(i => fg[i] * fg[3] + bg[i] * (1 - fg[3])) : fg.slice(0, 3);
    const background = el => {
        for (let e = el; e; e = e.parentElement) {
            const c = rgb(getComputedStyle(e).backgroundColor);
            if (c.length === 3 || (c.length > 3 && c[3] > 0.5)) return c.slice(0, 3);
        }
        return canvas;
    };
    const out = [];
    for (const el of document.querySelectorAll('.mf *')) {
        const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
        if (!own || el.closest('title, style')) continue;
        const style = getComputedStyle(el);
        if (style.visibility === 'hidden' || style.display === 'none') continue;
        const isSvg = el instanceof SVGElement;
        const bg = background(isSvg ? el.ownerSVGElement.parentElement : el);
        const fg = over(rgb(isSvg ? style.fill : style.color), bg);
        const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
        out.push({text: el.textContent.trim().slice(0, 30), ratio: (a + 0.05) / (b + 0.05),
                  bg: lum(bg)});
    }
    return out;
}"""
_CANVAS = {"light": [255, 255, 255], "dark": [18, 18, 18]}  # chromium's canvas per scheme


def _contrast(visit, scheme: str) -> list[dict]:
    return visit.page.evaluate(_CONTRAST, _CANVAS[scheme])


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_page_is_readable_in_both_colour_schemes(browser, tmp_path, scheme):
    store = mf.Store.open(sample_store_path())
    pages = {"digest": mf.digest(store).to_html(),
             "audit": mf.audit.recall_misses(store).to_html()}
    for name, html in pages.items():
        visit = Visit(browser, _write(tmp_path, f"{name}.html", html), scheme)
        visit.shot(f"{name}-{scheme}")
        visit.assert_clean()
        texts = _contrast(visit, scheme)
        assert len(texts) > 30, name
        low = [t for t in texts if t["ratio"] < 4.5]
        assert low == [], (name, scheme, low[:5])
        # the page follows the scheme: dark text on light, light text on dark
        backgrounds = {round(t["bg"], 2) for t in texts}
        assert all((b > 0.5) == (scheme == "light") for b in backgrounds), backgrounds


def test_a_dark_jupyterlab_theme_is_followed_whatever_the_system_prefers(browser, tmp_path):
    store = mf.Store.open(sample_store_path())
    theme = ("--jp-layout-color0:#111111;--jp-layout-color1:#1e1e1e;"
             "--jp-content-font-color1:rgba(255,255,255,1);"
             "--jp-content-font-color2:rgba(255,255,255,.72);--jp-border-color1:#616161;"
             "--jp-border-color2:#424242;background:#111111")
    html = (f"<!DOCTYPE html><meta charset='utf-8'><title>dark lab</title>"
            f"<body data-jp-theme-light='false' style='{theme}'>"
            + mf.digest(store, headlines=3)._repr_html_()
            + mf.audit.recall_misses(store)._repr_html_() + "</body>")
    visit = Visit(browser, _write(tmp_path, "lab-dark.html", html), "light")
    visit.shot("lab-dark")
    visit.assert_clean()
    texts = _contrast(visit, "light")
    assert len(texts) > 30
    assert [t for t in texts if t["ratio"] < 4.5] == []
    assert all(t["bg"] < 0.05 for t in texts)  # drawn on the notebook's dark background


def test_the_digest_subtitle_is_in_words_and_wide_tables_show_a_scroll_hint(browser, tmp_path):
    d = mf.digest(mf.Store.open(sample_store_path()))
    html = d.to_html()
    assert "ADVISORY_NOT_AUTHORITY" not in html.split("<title")[0] and "read it as data" in html
    visit = Visit(browser, _write(tmp_path, "narrow.html", html))
    visit.page.set_viewport_size({"width": 640, "height": 900})
    hints = visit.page.evaluate("""() => [...document.querySelectorAll('.mf-scroll')]
        .filter(b => b.scrollWidth > b.clientWidth + 1)
        .map(b => getComputedStyle(b).backgroundImage)""")
    assert hints, "some table is wider than 640 px"
    assert all(h.count("gradient") == 4 for h in hints)  # the edge shadows of a scroller


# every header and cell of memframe's tables, with its computed alignment and the one it
# should have: numbers right, everything else left
_ALIGN = """() => [...document.querySelectorAll('.mf table.mf-table th, .mf table.mf-table td')]
    .map(c => ({text: c.textContent.slice(0, 20), align: getComputedStyle(c).textAlign,
                want: c.classList.contains('mf-num') ? 'right' : 'left'}))
    .map(a => ({...a, align: a.align === 'start' ? 'left' : a.align}))"""


def _alignments(visit) -> list[dict]:
    return visit.page.evaluate(_ALIGN)


# per scroll box: the width of its table, its own width, whether it scrolls, its cue
_BOXES = """() => [...document.querySelectorAll('.mf-scroll')].map(b => ({
    caption: (b.closest('section, main, div.mf') && b.previousElementSibling
              ? b.previousElementSibling.textContent : '').slice(0, 40),
    table: b.querySelector('table').getBoundingClientRect().width,
    box: b.clientWidth, scrolls: b.scrollWidth > b.clientWidth + 1,
    overflow: getComputedStyle(b).overflowX,
    cue: getComputedStyle(b).backgroundImage.split('gradient').length - 1,
    right: b.getBoundingClientRect().right}))"""


@pytest.mark.parametrize("width", [1280, 800])
def test_no_table_overflows_the_page_and_headlines_use_the_width(browser, tmp_path, width):
    store = mf.Store.open(sample_store_path())
    d = mf.digest(store)
    pages = {"digest": d.to_html(), "audit": mf.audit.recall_misses(store).to_html()}
    for name, html in pages.items():
        visit = Visit(browser, _write(tmp_path, f"{name}-{width}.html", html))
        visit.page.set_viewport_size({"width": width, "height": 900})
        visit.page.wait_for_timeout(100)
        visit.shot(f"{name}-{width}")
        visit.assert_clean()
        page_width = visit.page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert page_width[0] <= page_width[1] == width, (name, page_width)
        boxes = visit.page.evaluate(_BOXES)
        assert len(boxes) >= 4, name
        for box in boxes:
            assert box["right"] <= width, (name, box)  # the box itself stays on the page
            if box["scrolls"]:
                # a wider table scrolls inside its box, and the box's edge shadows say so
                assert box["overflow"] in ("auto", "scroll") and box["cue"] == 4, (name, box)
        if width == 1280:  # a desktop page: every table fits, nothing to scroll
            assert [b for b in boxes if b["scrolls"]] == [], (name, boxes)
        assert [a for a in _alignments(visit) if a["align"] != a["want"]] == []
    # the digest's headlines read whole: the wire's text, shown in full (wrapped, never cut
    # by the page), in a column wider than a few dozen characters at 1280 px
    visit = Visit(browser, _write(tmp_path, f"headlines-{width}.html", pages["digest"]))
    visit.page.set_viewport_size({"width": width, "height": 900})
    cells = visit.page.evaluate("""() => [...document.querySelectorAll('td.mf-long')].map(c => ({
        text: c.textContent, clipped: c.scrollWidth > c.clientWidth + 1,
        width: c.getBoundingClientRect().width, ellipsis: getComputedStyle(c).textOverflow}))""")
    wire = {r["headline"] for key in ("newest", "handoff", "most_recalled")
            for r in d.to_dict()[key]}
    shown = {c["text"] for c in cells}
    assert wire <= shown
    assert [c for c in cells if c["clipped"] or c["ellipsis"] == "ellipsis"] == []
    if width == 1280:
        newest = visit.page.evaluate("""() => [...document.querySelectorAll('td.mf-long')]
            .map(c => c.getBoundingClientRect().width)""")
        assert max(newest) > 420, newest  # not a 35-character column


@pytest.mark.parametrize("width", [1280, 800])
def test_charts_fill_their_cards(browser, tmp_path, width):
    audit = mf.audit.recall_misses(mf.Store.open(sample_store_path()))
    visit = Visit(browser, _write(tmp_path, f"charts-{width}.html", audit.to_html()))
    visit.page.set_viewport_size({"width": width, "height": 900})
    visit.page.wait_for_timeout(100)
    visit.shot(f"charts-{width}")
    visit.assert_clean()
    fits = visit.page.evaluate("""() => [...document.querySelectorAll('.mf-chart-card')].map(c => {
        const s = getComputedStyle(c);
        const inner = c.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
        return {card: c.getBoundingClientRect().width, inner,
                svg: c.querySelector('svg').getBoundingClientRect().width}; })""")
    assert len(fits) == 3
    assert all(abs(f["svg"] - f["inner"]) <= 1 for f in fits), fits
    main = visit.page.evaluate("document.querySelector('main').clientWidth")
    if width == 1280:  # two cards a row, together the page's width
        assert all(f["card"] > 0.45 * (main - 40) for f in fits), (main, fits)
    else:  # one card a row: the whole width
        assert all(f["card"] >= main - 41 for f in fits), (main, fits)


def test_headers_are_words_with_the_column_name_in_a_tooltip(browser, tmp_path):
    d = mf.digest(mf.Store.open(sample_store_path()))
    visit = Visit(browser, _write(tmp_path, "headers.html", d.to_html()))
    heads = visit.page.evaluate("""() => [...document.querySelectorAll('.mf-table th')]
        .map(h => [h.textContent, h.getAttribute('title')])""")
    assert heads and all(title for _, title in heads)
    shown = dict((title, text) for text, title in heads)
    assert shown["project_id"] == "project" and shown["created_at"] == "created"
    assert shown["recall_count"] == "recalls" and shown["last_recalled_at"] == "last recalled"
    assert [text for text, _ in heads if "_" in text] == []


def test_a_host_stylesheet_does_not_move_the_cells(browser, tmp_path):
    """JupyterLab's and nbconvert's rules (cells right-aligned, fixed table layout, centred
    tables, striped rows) do not reach into memframe's tables."""
    store = mf.Store.open(sample_store_path())
    host = ("<style>table{table-layout:fixed;margin-left:auto;margin-right:auto}"
            "td,th{text-align:right;padding:.5em;max-width:none;white-space:normal}"
            "tbody tr:nth-child(odd){background:#f5f5f5}</style>")
    html = (f"<!DOCTYPE html><meta charset='utf-8'><title>host</title>{host}"
            + mf.digest(store)._repr_html_() + mf.audit.recall_misses(store)._repr_html_())
    visit = Visit(browser, _write(tmp_path, "host.html", html))
    visit.shot("host-stylesheet")
    visit.assert_clean()
    aligned = _alignments(visit)
    assert len(aligned) > 100
    assert [a for a in aligned if a["align"] != a["want"]] == []
    layout = visit.page.evaluate("""() => [...document.querySelectorAll('.mf table.mf-table')]
        .map(t => getComputedStyle(t).tableLayout)""")
    assert set(layout) == {"auto"}


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_diff_pages(browser, tmp_path, scheme):
    """`store.diff` and `mf.digest_diff` pages: self-contained, readable in both schemes,
    and no wider than the page at 800 px."""
    store = mf.Store.open(sample_store_path())
    since = store.generation - 6  # readable (the sample's vacuum keeps the last ones)
    pages = {"store-diff": store.diff(since).to_html(),
             "digest-diff": mf.digest_diff(mf.digest(store.at(since)),
                                           mf.digest(store)).to_html()}
    for name, html in pages.items():
        visit = Visit(browser, _write(tmp_path, f"{name}-{scheme}.html", html), scheme)
        visit.page.set_viewport_size({"width": 800, "height": 900})
        visit.page.wait_for_timeout(100)
        visit.shot(f"{name}-{scheme}")
        visit.assert_clean()
        texts = _contrast(visit, scheme)
        assert len(texts) > 8, name
        assert [t for t in texts if t["ratio"] < 4.5] == [], name
        width = visit.page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert width[0] <= width[1], (name, width)
        assert visit.page.locator("table").count() >= 2, name
