"""The jobs that keep derived state, and ``store.memory``.

A job is a pure function of the generation its commit is pinned to: `memframe.jobs.cycle`
folds what was written since the watermarks into every registered projection (spec 000's
session rows, the live-count indexes, the digest's state) and the rebuild door folds every
row; `memframe.jobs.registry` names what they maintain. `Memory` (``store.memory``) holds
the jobs and the projection doors of one store.

This package sits above `memframe.projections` and `memframe.digest`: it is the one place
that knows both.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.budget import memory_limit as memory_limit_of
from memframe.errors import DamagedDerivedError
from memframe.jobs import cycle as _cycle
from memframe.jobs.cycle import CycleReport, Progress
from memframe.jobs.registry import MEMORY_PROJECTION_NAMES, ProjectionRegistryError
from memframe.projections import abstract as _abstract
from memframe.projections import doors as _doors
from memframe.projections import episodes as _episodes
from memframe.projections.doors import Page
from memframe.projections.episodes import EpisodeReport

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
    def run_cycle(self, progress: _cycle.Progress | None = None) -> CycleReport:
        """Fold the canonical rows written since the watermarks into every projection.

        Reads only partitions committed after the watermarks and the stored rows of the
        keys they touch; writes the changed rows and the new watermarks in one commit; a
        cycle with nothing new writes nothing. ``progress(done, total, stage)``, when
        given, is called before each stage (the command line shows them).
        """
        damaged = getattr(self._store, "damaged_derived", None)
        if damaged is not None and damaged() is not None:
            # a derived file is torn (a crash, a disk): it is derived, so it is written again
            return _cycle.rebuild(self._store)  # type: ignore[arg-type]
        try:
            return _cycle.run_cycle(self._store, progress)  # type: ignore[arg-type]
        except DamagedDerivedError:
            # a derived file is torn: it is derived, so the rebuild writes it again
            return _cycle.rebuild(self._store)  # type: ignore[arg-type]

    def rebuild_projections(self, progress: Progress | None = None, *,
                            memory_limit: str | int | None = None) -> CycleReport:
        """The rebuild door: fold every canonical row, replace the projections in one commit.

        Run it on demand only (never on a timer): after any history of ingests and
        cycles it gives the identical rows and hashes. ``progress(done, total, stage)``,
        when given, is called before each stage; ``memory_limit`` (e.g. ``"2GB"``) bounds
        what its folds hold at once (`memframe.budget`; the answer is the same).
        """
        with memory_limit_of(memory_limit):
            return _cycle.rebuild(self._store, progress)  # type: ignore[arg-type]

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

    def kept_state_of(self, numbers: Sequence[int], stored: dict[Any, pl.DataFrame] | None = None
                      ) -> tuple[pl.DataFrame, int] | None:
        """The digest's kept state rows (`memframe.state.STATE_SCHEMA`) of the capsule
        ``numbers`` at this handle's generation, exact (the stored rows plus the rows
        above the watermark, folded), and the Parquet rows read. None when the state is
        not kept or cannot be trusted (no cycle ran, canonical parts edited since, a
        damaged derived file): only a fold of every row is exact then. ``stored``: a dict
        shared by calls at several generations for the same numbers, so that the stored
        rows of runs they have in common are read once."""
        from memframe.digest.state.warm_reader import read_state_of

        try:
            return read_state_of(self._store.pinned(), numbers, stored)
        except DamagedDerivedError:
            return None

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
