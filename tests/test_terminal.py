"""Every command under a pseudo-terminal of 80 columns, with hostile text in every stored text
field, in a store's directory name and in an import source.

Nothing that can drive a terminal reaches it (ESC and so CSI/OSC, BEL, C0/C1 controls, bidi
overrides and isolates, invisible characters): the hostile text is shown, escaped, and every
line of a text report fits the terminal's width.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import pty
import select
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

import memframe as mf
from memframe._render.terminal import columns, json_for_terminal, terminal_text, unsafe

from .importers import nmemory_fixture

ROOT = Path(__file__).resolve().parent.parent
WIDTH = 80

# title (OSC 0), clipboard (OSC 52), clear screen, hidden text, C1 CSI and OSC, BEL, bidi
# override and isolate, a tag character, a carriage return that would hide what precedes it
HOSTILE = ("\x1b]0;owned\x07\x1b]52;c;aGVsbG8=\x07\x1b[2J\x1b[8mhidden\x9b31m\x9d0;t\x07"
           "\u202eevil\u2066x\u2069\U000e0041\rtail")
SHOWN = "\\u001b]0;owned"  # how the start of HOSTILE reads once made visible
# a directory name can hold all of it but "/" (and NUL)
HOSTILE_DIR = "store-" + HOSTILE.replace("\r", "\x0b")


def _run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """``python -m memframe ARGV`` with stdin, stdout and stderr on one pty of WIDTH columns."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, WIDTH, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "memframe", *argv], cwd=cwd, env=env,
                            stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 120)
        if not ready:
            proc.kill()
            raise AssertionError(f"memframe {argv} hung")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the pty
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=60), out.decode("utf-8")


def _assert_safe(argv: list[str], text: str, *, fits: bool = True) -> None:
    # the pty turns "\n" into "\r\n"; a status line is rewritten in place with "\r"
    bad = [ch for ch in unsafe(text) if ch not in "\r\n"]
    assert bad == [], f"memframe {argv} let {bad!r} reach the terminal:\n{text!r}"
    if fits:
        for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            assert columns(line) <= WIDTH, f"memframe {argv}: {len(line)} columns: {line!r}"


@pytest.fixture(scope="module")
def hostile() -> Iterator[dict[str, Path]]:
    # a short root of its own: on 80 columns a line such as "wrote ROOT/pages/STORE-DIR" must
    # still show the start of the escaped name, wherever pytest keeps its temporary
    # directories (pytest-xdist adds a level per worker)
    root = Path(tempfile.mkdtemp(prefix="mf-"))
    yield _hostile(root)
    shutil.rmtree(root, ignore_errors=True)


def _hostile(root: Path) -> dict[str, Path]:
    t = dt.datetime(2026, 7, 1, 9, tzinfo=dt.UTC)
    store = mf.Store.create(root / HOSTILE_DIR, clock=lambda: t)
    ids = store.ingest([
        {"content": HOSTILE + " content", "source": HOSTILE, "anchor": HOSTILE,
         "project_id": HOSTILE, "conversation_id": HOSTILE, "author": HOSTILE},
        {"content": HOSTILE + " task", "source": "s", "anchor": "a", "project_id": "p/" + HOSTILE,
         "conversation_id": "c-" + HOSTILE, "kind": "task"},
    ])
    store.relate(ids[1], ids[0], "blocks")
    store.record_recall([ids[0]])
    store.record_miss([HOSTILE, "retreival"], "abstain")
    store.record_lane_override("term", "fused")  # a closed set of pairs
    store.pin(ids[1], reason=HOSTILE)
    store.review(ids[0], "proposed", reason=HOSTILE)
    sid = store.session_start(HOSTILE)
    store.session_finish(sid, handoff=HOSTILE + " handoff")
    (gone,) = store.ingest({"content": "to forget", "source": "s", "anchor": "b"})
    store.forget(gone, reason=HOSTILE)
    store.record_git_scan("git:" + HOSTILE, HOSTILE, [{"capsule_id": ids[0], "kind": "mention",
                                              "ref": HOSTILE, "verdict": "corroborated",
                                              "detail": HOSTILE}])
    # an nMEMORY source: hostile texts, a blocks cycle, and an extra table's name
    source = root / "source.db"
    b = nmemory_fixture.Builder(source)
    at = "2026-06-01T10:00:{:02d}Z".format
    a = b.ingest(HOSTILE + " alpha", at=at(1), project=HOSTILE, source=HOSTILE, anchor=HOSTILE)
    c = b.ingest("beta", at=at(2))
    b.relate(a, c, "blocks", at=at(3))
    b.relate(c, a, "blocks", at=at(4))
    b.miss([HOSTILE], "abstain", at=at(7))
    b.close()
    # a source whose edge names an id the engine never issued: refused, the id shown inert
    forged = root / "forged.db"
    f = nmemory_fixture.Builder(forged)
    c = f.ingest("beta", at=at(2))
    f.relate(c, HOSTILE, "blocks", at=at(5))
    f.close()
    con = sqlite3.connect(source)
    con.execute(f'CREATE TABLE "{HOSTILE.replace(chr(34), "")}" (x INTEGER)')
    con.commit()
    con.close()
    return {"root": root, "store": root / HOSTILE_DIR, "source": source, "forged": forged}


def _commands(h: dict[str, Path]) -> list[tuple[list[str], str | None, bool]]:
    """(argv, what must show escaped (None: nothing stored is printed), a text report)."""
    s, root = str(h["store"]), h["root"]
    imported = str(root / "imported")
    return [
        (["import", "nmemory", str(h["source"]), imported], SHOWN, True),
        (["import", "nmemory", str(h["forged"]), str(root / "refused")], None, True),
        (["digest", imported], SHOWN, True),
        (["digest", s], SHOWN, True),
        (["digest", s, "--format", "json"], SHOWN, False),
        (["digest", s, "--per-project", "1"], "== project \\u001b]0;owned", True),
        (["digest", s, "--per-project", "1", "--format", "json"], SHOWN, False),
        (["digest", s, "--format", "html"], "\\u001b]0;owned", False),
        (["digest", s, "--out", str(root / "pages"), "--format", "text"], SHOWN, True),
        (["sessions", s], SHOWN, True),
        (["sessions", s, "--format", "json"], SHOWN, False),
        (["info", s], SHOWN, True),
        (["info", s, "--format", "json"], SHOWN, False),
        (["audit", "misses", s], SHOWN, True),
        (["audit", "misses", s, "--format", "json"], SHOWN, False),
        (["cycle", s], None, True),
        (["rebuild", s], None, True),
        (["compact", s], None, True),
        (["vacuum", s], None, True),
        (["sessions", imported], None, True),
        (["audit", "misses", imported], SHOWN, True),
        (["digest", str(root / ("missing-" + HOSTILE_DIR))], SHOWN, True),
        (["synth", s, "--capsules", "200"], SHOWN, True),
        (["digest", "--headlines", HOSTILE], SHOWN, True),
        (["digest", "--hedlines\x1b]0;x\x07"], "\\u001b]0;x", True),
    ]


def test_every_command_under_a_pty_shows_hostile_text_inert_and_fits(hostile):
    seen = []
    for argv, shown, fits in _commands(hostile):
        code, text = _run(argv, hostile["root"])
        assert "Traceback" not in text, (argv, text)
        _assert_safe(argv, text, fits=fits)
        if shown is not None:  # (an error message is wrapped, not cut: join its lines)
            assert shown in text.replace("\r\n  ", ""), f"memframe {argv} hid it:\n{text}"
        seen.append((argv[0], code))
    assert ("import", 0) in seen and ("import", 1) in seen  # the forged source: refused
    assert ("digest", 2) in seen and ("digest", 1) in seen


def test_the_pages_written_with_out_are_safe_text_too(hostile):
    _run(["digest", str(hostile["store"]), "--out", str(hostile["root"] / "files"),
          "--format", "text"], hostile["root"])
    (page,) = (hostile["root"] / "files").iterdir()
    assert page.suffix == ".txt"
    text = page.read_text(encoding="utf-8")
    assert SHOWN in text and [c for c in unsafe(text) if c != "\n"] == []


def test_json_on_a_terminal_is_the_same_document():
    body = {"id": HOSTILE, "n": [1, "\u2028"]}
    wire = json.dumps(body, ensure_ascii=False)
    assert unsafe(wire)  # json.dumps leaves C1, bidi and tag characters raw
    shown = json_for_terminal(wire)
    assert [c for c in unsafe(shown)] == [] and json.loads(shown) == body


def test_text_is_cut_to_the_width_with_an_ellipsis():
    text = terminal_text("x" * 100 + "\n" + "日本" * 50, 80)
    first, second = text.split("\n")
    assert first == "x" * 79 + "…" and columns(second) <= 80 and second.endswith("…")
