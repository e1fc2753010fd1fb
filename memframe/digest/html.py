"""Notebook rendering of a digest, through the one rendering module (:mod:`memframe._render`).

Every value that came from the store (content headlines, project ids, miss terms, session
ids, cursors, ...) goes through :func:`esc`: control characters, line and paragraph
separators and bidirectional overrides are first made visible as ``\\uXXXX`` text, then
``html.escape(..., quote=True)`` neutralises markup and attribute breakouts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memframe._render import digest_html, esc, visible

__all__ = ["esc", "visible", "render_html"]


def render_html(body: Mapping[str, Any], *, title: str = "memframe digest") -> str:
    """Render a digest body (``Digest.to_dict()``) as one HTML fragment.

    Examples:
        >>> "<script" not in render_html({"unchanged": True, "hash": "<script>"})
        True
    """
    return digest_html(body, title=title)
