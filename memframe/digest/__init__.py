"""The session-start digest (spec 001, ``spec/digest-reference.md``).

``digest(store)`` pins one generation, reads each table it needs once, and assembles
the sections in the wire order of reference 4.0. Section families live in their own
modules: :mod:`~memframe.digest.capsules` (total, by_project, handoff, newest,
most_recalled), :mod:`~memframe.digest.counters` (relations, sessions, audit events),
:mod:`~memframe.digest.telemetry` (the fail-open legs), :mod:`~memframe.digest.planning`
(dag, mission, unanchored) and :mod:`~memframe.digest.ledger` (tiers, journal,
archive_candidates).

``memframe.digest`` (the attribute of the package ``memframe``) is the function `digest`;
this package is reached by its full name (``from memframe.digest import digest_many``).
"""

from __future__ import annotations

from memframe.digest.batch import digest_many, per_project_digests
from memframe.digest.core import HEADLINES_DEFAULT, digest, digest_tables
from memframe.digest.digest_diff import DigestDiff, digest_diff
from memframe.digest.explain import EXPLAIN_SECTIONS, explain
from memframe.digest.result import Digest

__all__ = [
    "digest",
    "digest_tables",
    "Digest",
    "per_project_digests",
    "digest_many",
    "digest_diff",
    "DigestDiff",
    "HEADLINES_DEFAULT",
    "explain",
    "EXPLAIN_SECTIONS",
]
