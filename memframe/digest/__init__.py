"""The session-start digest (spec 001, ``spec/digest-reference.md``).

``digest(store)`` pins one generation, reads each table it needs once, and assembles
the sections in the wire order of reference 4.0. Section families live in their own
modules: :mod:`~memframe.digest.capsules` (total, by_project, handoff, newest,
most_recalled), :mod:`~memframe.digest.counters` (relations, sessions, audit events),
:mod:`~memframe.digest.telemetry` (the fail-open legs), :mod:`~memframe.digest.planning`
(dag, mission, unanchored) and :mod:`~memframe.digest.ledger` (tiers, journal,
archive_candidates).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from memframe.digest.batch import digest_many, per_project_digests
from memframe.digest.core import HEADLINES_DEFAULT, digest, digest_tables
from memframe.digest.result import Digest

__all__ = [
    "digest",
    "digest_tables",
    "Digest",
    "per_project_digests",
    "digest_many",
    "HEADLINES_DEFAULT",
]


class _DigestPackage(types.ModuleType):
    """The package shares its name with the function ``memframe.digest``: importing the
    package rebinds ``memframe.digest`` to it, so the package is callable and calling it
    is calling :func:`digest`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Digest:
        return digest(*args, **kwargs)


sys.modules[__name__].__class__ = _DigestPackage
