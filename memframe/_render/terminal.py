"""Text made safe for a terminal, and cut to its width.

:func:`visible` is the one function that makes stored or source text safe to show: every
character that can drive a terminal (ESC and so CSI/OSC sequences, BEL, every C0 and C1
control, DEL), reorder or hide text (bidirectional marks, embeddings, overrides and
isolates, line and paragraph separators, zero-width and invisible format characters, tag
characters, a byte-order mark) or fail to encode (a lone surrogate) is shown as
``\\uXXXX`` text instead. It is idempotent, and the HTML escaping applies it first.

The command line passes everything it prints through :func:`terminal_text` (text reports,
messages) or :func:`json_for_terminal` (JSON printed to a terminal: the same document,
with those characters escaped). A leaf: no polars, nothing of the store.
"""

from __future__ import annotations

import datetime
import re
import unicodedata

__all__ = ["visible", "unsafe", "columns", "cut", "terminal_text", "json_for_terminal",
           "instant_text", "ELLIPSIS"]

ELLIPSIS = "…"

# Everything that is not shown as itself: controls, format characters that steer or hide
# text, separators that break a line, tag characters, lone surrogates.
_UNSAFE_RANGES = (
    (0x00, 0x1F), (0x7F, 0x9F),          # C0, DEL, C1 (CSI is 0x9B, OSC 0x9D)
    (0xAD, 0xAD),                        # soft hyphen: invisible
    (0x061C, 0x061C),                    # Arabic letter mark
    (0x115F, 0x1160), (0x180E, 0x180E),  # invisible fillers, Mongolian vowel separator
    (0x200B, 0x200F),                    # zero-width space/joiners, LRM, RLM
    (0x2028, 0x202E),                    # line/paragraph separators, embeddings, overrides
    (0x2060, 0x206F),                    # word joiner, invisible operators, isolates
    (0x3164, 0x3164), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0),
    (0xFFF9, 0xFFFB),                    # interlinear annotations
    (0xD800, 0xDFFF),                    # lone surrogates (cannot be encoded)
    (0x1D173, 0x1D17A),                  # musical format characters
    (0xE0000, 0xE007F),                  # tag characters (invisible text)
)
_UNSAFE = re.compile("[" + "".join(
    f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in _UNSAFE_RANGES) + "]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def visible(text: str) -> str:
    """Make every character that could drive, reorder or hide terminal text visible as
    ``\\uXXXX`` (``\\UXXXXXXXX`` above the BMP). Idempotent.

    Examples:
        >>> visible("a\\nb\\u202ec")
        'a\\\\u000ab\\\\u202ec'
        >>> visible("\\x1b]52;c;aGk=\\x07 title\\x9b2J")
        '\\\\u001b]52;c;aGk=\\\\u0007 title\\\\u009b2J'
        >>> visible(visible("\\u2067x\\U000e0041")) == visible("\\u2067x\\U000e0041")
        True
    """
    return _UNSAFE.sub(_escape, text)


def unsafe(text: str) -> list[str]:
    """The characters :func:`visible` would escape (for tests and checks).

    Examples:
        >>> unsafe("ok\\x1b[2J\\u2066")
        ['\\x1b', '\\u2066']
    """
    return _UNSAFE.findall(text)


def _width(ch: str) -> int:
    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def columns(text: str) -> int:
    """How many terminal columns a (visible) text takes: wide East Asian characters two,
    combining marks none.

    Examples:
        >>> columns("abc"), columns("日本"), columns("e\\u0301")
        (3, 4, 1)
    """
    return sum(_width(ch) for ch in text)


def cut(line: str, width: int) -> str:
    """One line cut to ``width`` columns, ending in ``…`` when something was cut.

    Examples:
        >>> cut("retrieval schema fix", 12)
        'retrieval s…'
        >>> cut("short", 12)
        'short'
        >>> cut("日本語のテキスト", 7)
        '日本語…'
    """
    if width <= 0 or columns(line) <= width:
        return line
    out, used = [], 0
    for ch in line:
        w = _width(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out).rstrip() + ELLIPSIS


def terminal_text(text: str, width: int | None = None) -> str:
    """A text report made safe line by line (the newlines between lines are kept, every
    other unsafe character shown), each line cut to ``width`` columns when given.

    Examples:
        >>> terminal_text("== project \\x1b]0;owned\\x07\\nnext", 40)
        '== project \\\\u001b]0;owned\\\\u0007\\nnext'
        >>> terminal_text("a" * 100, 10)
        'aaaaaaaaa…'
    """
    lines = [visible(line) for line in text.split("\n")]
    if width:
        lines = [cut(line, width) for line in lines]
    return "\n".join(lines)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a JSON string spells a code point above the BMP as a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_for_terminal(document: str) -> str:
    """A JSON document with every unsafe character escaped inside its strings: the same
    document to a JSON reader, inert on a terminal. The newlines of an indented document
    are kept (JSON strings never hold a raw newline).

    Examples:
        >>> json_for_terminal('{"id":"x\\u202ey\\x9d"}')
        '{"id":"x\\\\u202ey\\\\u009d"}'
        >>> import json
        >>> json.loads(json_for_terminal(json.dumps(["\\U000e0041"], ensure_ascii=False)))
        ['\\U000e0041']
    """
    return "\n".join(_UNSAFE.sub(_json_escape, line) for line in document.split("\n"))


_RFC3339 = re.compile(r"^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?(Z|[+-]00:?00)?$")


def instant_text(value: datetime.datetime | datetime.date | str | None) -> str:
    """An instant in the one format of every text report and page: ``YYYY-MM-DD
    HH:MM:SSZ`` (UTC, to the second); a date as ``YYYY-MM-DD``.

    Examples:
        >>> instant_text("2026-06-13T08:48:29.335893306Z")
        '2026-06-13 08:48:29Z'
        >>> instant_text(datetime.datetime(2026, 6, 13, 8, 48, 29, 5, tzinfo=datetime.UTC))
        '2026-06-13 08:48:29Z'
        >>> instant_text(None)
        ''
    """
    if value is None:
        return ""
    if isinstance(value, str):
        match = _RFC3339.match(value)
        return f"{match.group(1)} {match.group(2)}Z" if match else visible(value)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC)
        return value.strftime("%Y-%m-%d %H:%M:%S") + "Z"
    return value.isoformat()
