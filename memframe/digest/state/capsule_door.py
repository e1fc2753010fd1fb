"""The digest state's door: the exact state rows at a generation, as a `Page`
(registered as the ``digest`` projection's door in `memframe.jobs.registry`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memframe.digest.state import digest_capsules, warm_reader

if TYPE_CHECKING:
    from memframe.store import StoreView


def state_door(view: StoreView) -> Any:
    """The digest state's door: the exact state rows at ``view`` as a `Page`. The text
    columns (``thread``, ``headline``) are those of the subset's members and of the rows
    folded now; the state keeps no other text (null: read it from the capsule).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "ACTIVE(t): go", "source": "s", "anchor": "a"})
        >>> state_door(store.pinned()).rows.select("num", "threaded", "thread", "named").rows()
        [(1, True, 't', True)]
    """
    from memframe.projections.doors import Page

    state, visited, _delta = warm_reader.read_state(view)
    return Page(rows=state, rows_visited=visited, hash=digest_capsules.state_hash(state))
