"""Progress bars of the long paths (a fold of every row, a diff over a long range).

They are tqdm bars on stderr, drawn only inside `showing(True)` and only on a terminal: the
command line turns them on (not with ``--quiet``); a library call stays silent.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["showing", "bar"]

_SHOW: contextvars.ContextVar[bool] = contextvars.ContextVar("memframe_progress", default=False)


@contextlib.contextmanager
def showing(enabled: bool) -> Iterator[None]:
    """Draw the long paths' bars inside the block (on a terminal).

    Examples:
        >>> with showing(True):
        ...     bar(3, "fold", "range").disable == (not sys.stderr.isatty())
        True
        >>> bar(3, "fold", "range").disable  # not asked: silent
        True
    """
    token = _SHOW.set(enabled)
    try:
        yield
    finally:
        _SHOW.reset(token)


class _Silent:
    """A bar that draws nothing (and imports nothing)."""

    disable = True

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self) -> _Silent:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def bar(total: int, desc: str, unit: str) -> Any:
    """A bar of ``total`` ``unit`` steps, silent unless `showing` and stderr is a terminal
    (or when there is one step only); cleared when done."""
    if not (_SHOW.get() and total > 1 and sys.stderr.isatty()):
        return _Silent()
    from tqdm import tqdm  # a terminal's bar (tqdm.auto would pick a notebook widget)

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False)
