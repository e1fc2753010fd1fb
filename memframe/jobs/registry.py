"""The closed set of memory projections, and what each one is made of.

``MEMORY_PROJECTION_NAMES`` names every projection memframe maintains, in the order the
jobs run them. Each name maps to a `Projection`: its fold (the one group-by both callers
use), its door (the read function that answers from it) and its two stages, the cycle and
the rebuild (`memframe.jobs.stages`). `memframe.jobs.cycle` runs exactly the stages of the
names listed here, so the tuple is the dispatch, not a label. A name without all four
fails at import time with `ProjectionRegistryError`, so a projection can never be half
added.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memframe.digest.state import warm_reader
from memframe.errors import ProjectionRegistryError
from memframe.jobs import stages
from memframe.projections import doors, session
from memframe.state import fold_state

__all__ = ["MEMORY_PROJECTION_NAMES", "PROJECTIONS", "FOLDS", "DOORS", "Projection",
           "ProjectionRegistryError", "check_registry"]

#: The closed set of memory projections (spec 000): the sessions and the digest's state.
MEMORY_PROJECTION_NAMES: tuple[str, ...] = ("session", "digest")


@dataclasses.dataclass(frozen=True)
class Projection:
    """What one registered projection is made of."""

    fold: Callable[..., Any]
    door: Callable[..., Any]
    cycle: Callable[[stages.Job], stages.Reports]
    rebuild: Callable[[stages.Job], stages.Reports]


PROJECTIONS: dict[str, Projection] = {
    # the session fold is the group-by over partial rows: the cycle combines the new rows'
    # partials with it, the rebuild folds every row through it, readers combine the
    # stored partials with it
    "session": Projection(session.combine_partials, doors.sessions, stages.session_cycle,
                          stages.session_rebuild),
    "digest": Projection(fold_state, warm_reader.state_door,
                         stages.digest_cycle, stages.digest_rebuild),
}

#: name -> the projection's fold (used by both the cycle and the rebuild)
FOLDS: dict[str, Callable[..., Any]] = {n: p.fold for n, p in PROJECTIONS.items()}
#: name -> the projection's read door
DOORS: dict[str, Callable[..., Any]] = {n: p.door for n, p in PROJECTIONS.items()}


def check_registry(names: Iterable[str], folds: Mapping[str, Callable[..., Any]],
                   doors: Mapping[str, Callable[..., Any]],
                   jobs: Mapping[str, Projection] | None = None) -> None:
    """Refuse a registry where a name lacks its fold, door or stages, or a fold/door lacks
    its name.

    Raises:
        ProjectionRegistryError: naming every incomplete projection and what it lacks.

    Examples:
        >>> check_registry(("session", "digest"), FOLDS, DOORS)
        >>> check_registry(("session", "digest", "topic"), FOLDS, DOORS)
        Traceback (most recent call last):
        ...
        memframe.errors.ProjectionRegistryError: memory projection 'topic' is in MEMORY_PROJECTION_NAMES without a fold and without a door; register both in memframe/jobs/registry.py (PROJECTIONS), or remove the name
    """
    names = tuple(names)
    problems = []
    if len(set(names)) != len(names):
        problems.append(f"MEMORY_PROJECTION_NAMES repeats a name: {names!r}")
    for name in names:
        lacks = [what for what, table in (("a fold", folds), ("a door", doors))
                 if not callable(table.get(name))]
        if jobs is not None and name in jobs:
            lacks += [f"a {what} stage" for what in ("cycle", "rebuild")
                      if not callable(getattr(jobs[name], what, None))]
        elif jobs is not None:
            lacks.append("its stages")
        if lacks:
            problems.append(
                f"memory projection {name!r} is in MEMORY_PROJECTION_NAMES without "
                f"{' and without '.join(lacks)}; register both in "
                f"memframe/jobs/registry.py (PROJECTIONS), or remove the name"
            )
    for what, table in (("fold", folds), ("door", doors)):
        for name in table:
            if name not in names:
                problems.append(f"a {what} is registered for {name!r}, which is not in "
                                f"MEMORY_PROJECTION_NAMES; add the name or drop the {what}")
    if problems:
        raise ProjectionRegistryError("; ".join(problems))


check_registry(MEMORY_PROJECTION_NAMES, FOLDS, DOORS, PROJECTIONS)
