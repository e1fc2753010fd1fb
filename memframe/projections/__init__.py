"""Memory projections (spec 000): derived rows, their cycle, their rebuild door, their doors.

``store.memory`` returns a `Memory` bound to a store (or a frozen view). Reads pin one
generation per call; writes are single commits.

A page's ``hash`` lets a caller skip re-reading rows it already holds: passing it back as
``known_hash`` answers ``unchanged=True`` with no rows. That saves the caller's tokens,
never the engine's reads.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.projections import abstract as _abstract
from memframe.projections import cycle as _cycle
from memframe.projections import doors as _doors
from memframe.projections import episodes as _episodes
from memframe.projections.cycle import CycleReport
from memframe.projections.doors import Page
from memframe.projections.episodes import EpisodeReport
from memframe.projections.registry import MEMORY_PROJECTION_NAMES, ProjectionRegistryError

if TYPE_CHECKING:
    from memframe.store import Store, StoreView

__all__ = ["Memory", "Page", "CycleReport", "EpisodeReport", "MEMORY_PROJECTION_NAMES",
           "ProjectionRegistryError"]


class Memory:
    """The projection doors and jobs of one store (``store.memory``).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest([{"content": t, "source": "s", "anchor": t,
        ...                    "conversation_id": "conv-1"} for t in "ab"])
        >>> store.memory.run_cycle().projections["session"]["rows_folded"]
        2
        >>> store.memory.sessions().rows.select("conversation_id", "memory_count").rows()
        [('conv-1', 2)]
    """

    def __init__(self, store: Store | StoreView):
        self._store = store

    def __repr__(self) -> str:
        return f"<memframe Memory of {self._store.path}>"

    # -- jobs and the rebuild door ---------------------------------------------------------
    def run_cycle(self) -> CycleReport:
        """Fold the canonical rows written since the watermark into the projections.

        Reads only partitions committed after the watermark and the stored rows of the
        conversations they touch; writes the changed rows and the new watermark in one
        commit; a cycle with nothing new writes nothing.
        """
        return _cycle.run_cycle(self._store)  # type: ignore[arg-type]

    def rebuild_projections(self) -> CycleReport:
        """The rebuild door: fold every canonical row, replace the projections in one commit.

        Run it on demand only (never on a timer): after any history of ingests and
        cycles it gives the identical rows and hashes.
        """
        return _cycle.rebuild(self._store)  # type: ignore[arg-type]

    def run_episode_job(self, gap: dt.timedelta | float | int = _episodes.DEFAULT_GAP
                        ) -> EpisodeReport:
        """Walk new capsules into episodes (see `memframe.projections.episodes`)."""
        return _episodes.run_episode_job(self._store, gap)  # type: ignore[arg-type]

    # -- doors ----------------------------------------------------------------------------
    def sessions(self, conversation_id: str | Sequence[str] | None = None,
                 since: dt.datetime | str | None = None, limit: int | None = None,
                 known_hash: str | None = None) -> Page:
        """Session rows, ``last_at`` desc then conversation_id (see `doors.sessions`)."""
        return self._store.read(  # re-pinned if a vacuum removes what it reads
            lambda v: _doors.sessions(v, conversation_id, since, limit, known_hash))

    def session_digest(self, limit: int = 10, known_hash: str | None = None) -> Page:
        """One line per session and their hash (see `doors.session_digest`).

        The hash saves the caller's tokens (an unchanged digest hands no rows), never
        the engine's reads.
        """
        return self._store.read(lambda v: _doors.session_digest(v, limit, known_hash))

    def episodes(self, conversation_id: str | Sequence[str] | None = None,
                 include_open: bool = True) -> Page:
        """Closed episodes, plus the still-open tail at read time (see `episodes.episodes`)."""
        return self._store.read(lambda v: _episodes.episodes(v, conversation_id, include_open))

    # -- landing prose ----------------------------------------------------------------------
    def abstract(self, member_ids: Sequence[str], content: str, *, source: str, anchor: str,
                 **fields: Any) -> str:
        """Rollup capsule + processing rows + abstracted_into edges, in one commit."""
        return _abstract.abstract(self._store, member_ids, content, source=source,  # type: ignore[arg-type]
                                  anchor=anchor, **fields)

    def summarize(self, session_ids: Sequence[str] | str,
                  summarizer: Callable[[pl.DataFrame], str | None]) -> dict[str, str]:
        """The language seam: land what ``summarizer`` says about each session."""
        return _abstract.summarize(self._store, self._store.pinned(), session_ids,  # type: ignore[arg-type]
                                   summarizer)
