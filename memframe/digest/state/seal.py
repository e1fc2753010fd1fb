"""The seal over the canonical parts the digest's state folded.

The state trusts that the canonical parts at or below its watermarks are the very files
the job folded. The job records the sha256 of every such part's path, row count and size
(watermark `MARK`); a warm digest stats the parts and compares (one stat each, nothing
read): when the seal does not hold it uses no derived state, and the next cycle rebuilds
it. Sizes, not inodes, so that a copy of the store keeps its seal; an edit that keeps a
part's size is seen only by ``verify="full"``. A compaction or an erasure seals the parts
it rewrote again in its own commit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memframe.schema import CANONICAL_TABLES
from memframe.store import fingerprint

if TYPE_CHECKING:
    from memframe.store import StoreView

__all__ = ["MARK", "seal_of", "holds", "stage"]

#: the watermark holding the seal of the canonical parts the digest's state folded
MARK = fingerprint.SEAL_MARK


def seal_of(view: StoreView, top: int | None = None) -> dict[str, Any] | None:
    """The seal of the canonical parts at or below ``top`` (default: every part) at
    ``view``, by their sizes now; None when a part cannot be stat'ed."""
    if top is None:
        top = max((p.seq_hi or 0 for name in CANONICAL_TABLES for p in view.partitions(name)),
                  default=0)
    return fingerprint.canonical_seal(view.path, {name: view.partitions(name)
                                                  for name in CANONICAL_TABLES}, top)


def holds(view: StoreView) -> bool:
    """Are the canonical parts at or below the recorded seal the very files sealed? False
    when no seal was recorded (a store whose digest job never ran).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a"})
        >>> holds(store.pinned())
        False
        >>> _ = store.memory.run_cycle()
        >>> holds(store.pinned())
        True
    """
    recorded = view.watermarks.get(MARK)
    if not isinstance(recorded, dict):
        return False
    now = seal_of(view, int(recorded.get("seq", -1)))
    return now is not None and now == recorded


def stage(commit: Any, view: StoreView) -> None:
    """Record the seal of every canonical part ``view`` names (the parts the job just
    folded), unless it is the one recorded (a cycle with nothing new writes nothing) or
    there is none (a virgin store)."""
    now = seal_of(view)
    if now is not None and now["parts"] and view.watermarks.get(MARK) != now:
        commit.set_watermark(MARK, now)
