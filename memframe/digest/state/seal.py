"""The seal over the canonical parts the digest's state folded.

The digest's state (the per-capsule rows, the families, the kept sections) is a fold of
the canonical rows at or below its watermarks; a warm digest adds only the rows above
them. It therefore trusts that the canonical parts at or below the watermarks are the
very files the job folded. Parts are immutable, but a file can still be rewritten in
place (an edit, a restore from a backup): its rows would then differ from what the state
holds, and the warm answer from the full one.

So the digest job records, with the state, a *seal*: the sha256 of the path, row count
and size of every canonical part the generation names (watermark `MARK`, with the
highest ``seq`` it covers and how many parts). A warm digest stats the parts at or below
that ``seq`` (one stat each, nothing read) and compares: when the seal does not hold, no
derived state is used and the digest folds from the rows, as with ``verify="full"``; the
next cycle rebuilds the digest's state and says so in its report.

Sizes, not inodes or change times: a copy of the store (a clone, the installed sample, a
restored backup) keeps its seal. What the seal does not see: an edit that keeps a part's
size, and a part rewritten together with the seal; ``verify="full"`` trusts nothing but
the rows. A compaction or an erasure (new files, the same rows) is sealed again by its own
commit (the store re-seals the parts it rewrote: the rows the state folded are the same,
content aside).
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
