"""Plain functions behind ``memframe sessions``, ``memframe cycle`` and ``memframe rebuild``.

Each takes a store (or a path) and returns a JSON-ready dict; the command line prints it.
"""

from __future__ import annotations

import os
from typing import Any

from memframe.store import Store, StoreView

__all__ = ["sessions_command", "cycle_command", "rebuild_command"]


def _store(store: Store | StoreView | str | os.PathLike[str]) -> Store | StoreView:
    if isinstance(store, StoreView):
        return store
    return Store.open(store)


def sessions_command(store: Store | StoreView | str | os.PathLike[str],
                     known_hash: str | None = None, limit: int = 10) -> dict[str, Any]:
    """``memframe sessions [STORE] [--known-hash H]``: the session digest as a dict.

    Returns ``{"hash", "unchanged", "rows_visited", "total", "sessions": [line, ...]}``.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "s")
        >>> _ = mf.Store.create(path)
        >>> sessions_command(path)["sessions"]
        []
    """
    page = _store(store).memory.session_digest(limit=limit, known_hash=known_hash)
    return {"hash": page.hash, "unchanged": page.unchanged, "rows_visited": page.rows_visited,
            "total": page.total, "sessions": page.rows["line"].to_list()}


def cycle_command(store: Store | str | os.PathLike[str]) -> dict[str, Any]:
    """``memframe cycle [STORE]``: run one incremental cycle; the report as a dict.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "s")
        >>> _ = mf.Store.create(path)
        >>> cycle_command(path)["rows_folded"]
        0
    """
    return _store(store).memory.run_cycle().to_dict()


def rebuild_command(store: Store | str | os.PathLike[str]) -> dict[str, Any]:
    """``memframe rebuild [STORE]``: the rebuild door; the report as a dict.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "s")
        >>> _ = mf.Store.create(path)
        >>> rebuild_command(path)["rows_written"]
        0
    """
    return _store(store).memory.rebuild_projections().to_dict()
