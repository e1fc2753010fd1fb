"""Memory projections (spec 000): derived rows, their folds and their doors.

* `memframe.projections.session`: the session fold (one row per conversation) and
  `memframe.projections.session_rows`, where its partial rows are kept;
* `memframe.projections.forgotten`: the live-count indexes the session door reads;
* `memframe.projections.doors`: the ``sessions`` and ``session_digest`` doors (`Page`);
* `memframe.projections.episodes`: the episode walk and its door;
* `memframe.projections.abstract`: ``abstract()`` and the language seam ``summarize()``.

The jobs that advance them, and ``store.memory``, are in `memframe.jobs`.

A page's ``hash`` lets a caller skip re-reading rows it already holds: passing it back as
``known_hash`` answers ``unchanged=True`` with no rows. That saves the caller's tokens,
never the engine's reads.
"""

from __future__ import annotations

from memframe.projections.doors import Page
from memframe.projections.episodes import EpisodeReport

__all__ = ["Page", "EpisodeReport"]
