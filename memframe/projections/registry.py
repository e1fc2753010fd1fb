"""The closed set of memory projections, each with its fold and its door.

``MEMORY_PROJECTION_NAMES`` names every projection memframe maintains. Each name must map
to a fold (the one function both the cycle and the rebuild call) and to a door (the read
function that answers from it). A name without both fails at import time with
`ProjectionRegistryError`, so a projection can never be half added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from memframe.errors import ProjectionRegistryError
from memframe.projections import digest_state, doors, session

__all__ = ["MEMORY_PROJECTION_NAMES", "FOLDS", "DOORS", "ProjectionRegistryError",
           "check_registry"]

#: The closed set of memory projections (spec 000): the sessions and the digest's state.
MEMORY_PROJECTION_NAMES: tuple[str, ...] = ("session", "digest")

#: name -> the projection's fold (used by both the cycle and the rebuild)
FOLDS: dict[str, Callable[..., Any]] = {
    # the group-by over partial rows: the cycle combines the new rows' partials with it,
    # the rebuild folds every row through it (`session.fold_sessions`), readers combine
    # the stored partials with it
    "session": session.combine_partials,
    "digest": digest_state.fold_state,
}

#: name -> the projection's read door
DOORS: dict[str, Callable[..., Any]] = {
    "session": doors.sessions,
    "digest": digest_state.state_door,
}


def check_registry(names: Iterable[str], folds: Mapping[str, Callable[..., Any]],
                   doors: Mapping[str, Callable[..., Any]]) -> None:
    """Refuse a registry where a name lacks its fold or door, or a fold/door lacks its name.

    Raises:
        ProjectionRegistryError: naming every incomplete projection and what it lacks.

    Examples:
        >>> check_registry(("session", "digest"), FOLDS, DOORS)
        >>> check_registry(("session", "digest", "topic"), FOLDS, DOORS)
        Traceback (most recent call last):
        ...
        memframe.errors.ProjectionRegistryError: memory projection 'topic' is in MEMORY_PROJECTION_NAMES without a fold and without a door; register both in memframe/projections/registry.py (FOLDS and DOORS), or remove the name
    """
    names = tuple(names)
    problems = []
    if len(set(names)) != len(names):
        problems.append(f"MEMORY_PROJECTION_NAMES repeats a name: {names!r}")
    for name in names:
        lacks = [what for what, table in (("a fold", folds), ("a door", doors))
                 if not callable(table.get(name))]
        if lacks:
            problems.append(
                f"memory projection {name!r} is in MEMORY_PROJECTION_NAMES without "
                f"{' and without '.join(lacks)}; register both in "
                f"memframe/projections/registry.py (FOLDS and DOORS), or remove the name"
            )
    for what, table in (("fold", folds), ("door", doors)):
        for name in table:
            if name not in names:
                problems.append(f"a {what} is registered for {name!r}, which is not in "
                                f"MEMORY_PROJECTION_NAMES; add the name or drop the {what}")
    if problems:
        raise ProjectionRegistryError("; ".join(problems))


check_registry(MEMORY_PROJECTION_NAMES, FOLDS, DOORS)
