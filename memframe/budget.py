"""The memory budget: how much memory the paths that read a whole store may use.

A budget is set, first match wins, by:

* ``with mf.memory_limit("2GB"): ...`` (also what the long calls' ``memory_limit=``
  argument does for their duration);
* the ``MEMFRAME_MEMORY_LIMIT`` environment variable (``memframe --memory-limit 2GB ...``
  sets it for the command);
* nothing: no budget, and each path uses the chunk sizes it was measured with.

A path that reads the whole store asks `chunk_rows` how many rows one chunk of its work
may hold. Under a budget that is the most that fits; when not even the smallest chunk
fits, it raises `MemoryBudgetError` before it reads anything, with what it would need.
Chunking never changes an answer: a path gives the same bytes under any budget.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import re
from collections.abc import Iterator

from memframe.errors import InvalidInputError, MemoryBudgetError

__all__ = ["ENV", "parse_memory", "memory_limit", "current_limit", "chunk_rows", "fold_range",
           "fits_whole", "format_bytes"]

#: the environment variable that sets the budget of every path
ENV = "MEMFRAME_MEMORY_LIMIT"

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$")
#: a budget below this cannot even hold the interpreter and its libraries
FLOOR = 64 * 2**20

#: what a fold of every capsule's state (the cold digest, ``verify="full"``, the rebuild)
#: holds, in bytes, measured with benchmarks/bench_scale.py: per capsule of a range (its
#: source rows, partials and state row), per source row narrowed for the whole fold, per
#: capsule planned (its number), and the interpreter with its libraries; a range never
#: holds fewer than ``SMALLEST_RANGE`` capsules
RANGE_BYTES, NARROW_BYTES, PLAN_BYTES, BASE_BYTES = 480, 40, 24, 300 * 2**20
SMALLEST_RANGE = 1_000

#: what a cycle holds per capsule row above its watermarks (it folds them in memory, with
#: their state and session rows): a first cycle of a 10M-capsule store peaked at 7.75 GiB
CYCLE_ROW_BYTES = 800

#: what reading every row at once holds (the digest's reference read), per row read
#: (measured: 165 bytes at 1M capsules, 334 at 10M, where it peaked at 22.7 GB); it is
#: taken only within the budget and ``WHOLE_CEILING``
WHOLE_ROW_BYTES, WHOLE_CEILING = 200, 2 * 10**9

_LIMIT: contextvars.ContextVar[int | None] = contextvars.ContextVar("memframe_memory_limit",
                                                                   default=None)


def parse_memory(value: str | int, *, what: str = "memory limit") -> int:
    """Bytes of a memory size: an int (bytes) or text such as ``"2GB"``, ``"512MiB"``,
    ``"1.5g"`` (decimal units; ``KiB``/``MiB``/``GiB`` binary).

    Examples:
        >>> parse_memory("2GB"), parse_memory("512MiB"), parse_memory(4096 * 2**20)
        (2000000000, 536870912, 4294967296)
        >>> parse_memory("lots")
        Traceback (most recent call last):
        ...
        memframe.errors.InvalidInputError: memory limit 'lots' is not a size; give bytes or a number with a unit, e.g. 2GB, 512MiB
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInputError(f"{what} must be a size such as '2GB' or a number of bytes; "
                                f"got {type(value).__name__}")
    if isinstance(value, int):
        size = value
    else:
        found = _SIZE.match(value.lower())
        if found is None or found.group(2) not in _UNITS:
            raise InvalidInputError(f"{what} {value!r:.40} is not a size; give bytes or a "
                                    f"number with a unit, e.g. 2GB, 512MiB")
        scaled = float(found.group(1)) * _UNITS[found.group(2)]
        if not math.isfinite(scaled):
            raise InvalidInputError(f"{what} {value!r:.40} is too large; give a size this "
                                    f"machine could hold, e.g. 2GB")
        size = int(scaled)
    if size < FLOOR:
        raise InvalidInputError(f"{what} {value!r:.40} is below {format_bytes(FLOOR)}, "
                                f"which the interpreter alone needs; give at least that")
    return size


def format_bytes(n: float) -> str:
    """``n`` bytes as a person reads them.

    Examples:
        >>> format_bytes(2_500_000_000), format_bytes(3 * 2**20)
        ('2.5 GB', '3.1 MB')
    """
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def current_limit() -> int | None:
    """The budget in bytes now in force (`memory_limit`, else ``MEMFRAME_MEMORY_LIMIT``),
    or None."""
    limit = _LIMIT.get()
    if limit is not None:
        return limit
    text = os.environ.get(ENV, "").strip()
    return parse_memory(text, what=ENV) if text else None


@contextlib.contextmanager
def memory_limit(limit: str | int | None) -> Iterator[int | None]:
    """Run the block under a memory budget (None: the one already in force).

    Examples:
        >>> with memory_limit("1GB") as limit:
        ...     limit, current_limit()
        (1000000000, 1000000000)
    """
    value = None if limit is None else parse_memory(limit)
    if value is None:
        yield current_limit()
        return
    token = _LIMIT.set(value)
    try:
        yield value
    finally:
        _LIMIT.reset(token)


def chunk_rows(*, default: int, per_row: float, fixed: float, smallest: int, what: str,
               limit: int | None = None) -> int:
    """The rows one chunk of a path may hold under the budget: ``default`` with no budget;
    else the most rows (at most ``default``) with ``fixed + rows * per_row`` bytes within
    the budget, and never fewer than ``smallest``.

    Raises:
        MemoryBudgetError: when ``smallest`` rows do not fit, before anything is read; the
            message says what ``what`` would need.

    Examples:
        >>> chunk_rows(default=500_000, per_row=1_000, fixed=200e6, smallest=1_000,
        ...            what="the cold fold", limit=400_000_000)
        200000
    """
    limit = current_limit() if limit is None else limit
    if limit is None:
        return default
    room = limit - fixed
    rows = math.floor(room / per_row) if room > 0 else 0
    if rows < smallest:
        need = fixed + smallest * per_row
        raise MemoryBudgetError(
            f"{what} needs about {format_bytes(need)} at this store's size, more than the "
            f"memory limit of {format_bytes(limit)}; raise it (--memory-limit or {ENV}) to at "
            f"least {format_bytes(need * 1.1)}. It stopped before its work; nothing was "
            f"written.", need=int(need), limit=limit)
    return max(smallest, min(default, rows))


def fold_range(default: int, source_rows: int, capsules: int) -> int:
    """Capsules per range of a fold of every capsule's state over ``source_rows`` rows
    (beside the capsules') and ``capsules`` capsules: ``default`` with no budget."""
    fixed = BASE_BYTES + source_rows * NARROW_BYTES + capsules * PLAN_BYTES
    return chunk_rows(default=default, per_row=RANGE_BYTES, fixed=fixed,
                      smallest=SMALLEST_RANGE, what="the fold of every row")


def fits_whole(rows: int) -> bool:
    """Do ``rows`` read at once (and folded in one piece) fit the budget and the ceiling?

    Examples:
        >>> fits_whole(1_000_000), fits_whole(60_000_000)
        (True, False)
    """
    limit = current_limit()
    room = WHOLE_CEILING if limit is None else min(limit, WHOLE_CEILING)
    return BASE_BYTES + rows * WHOLE_ROW_BYTES <= room
