"""Review and pin state for the digest: the staged fence (reference 2.1), the ``staged``
section and the ``pinned`` / ``pinned_total`` sections (4.17).

* A capsule is **staged** when it has at least one review row and its latest one (by
  ``seq``) is not ``ratified`` (the capsule-state fold's ``staged``, `memframe.state`). Staged capsules leave every capsule section (the
  population of :func:`memframe.digest.scope.population`) and count only under
  ``staged``; tiers, the journal, archive candidates and the dag still see them.
* A capsule is **pinned** when its latest pin row says so. Every headline row carries
  ``pinned: true`` for it, and the fenced ``pinned`` section lists the pinned capsules of
  the population, newest first, capped at :data:`PINNED_CAP` (not the headline cap N).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence

import polars as pl

from memframe.digest.scope import SCOPE, per_scope
from memframe.text import rfc3339, rfc3339_text

__all__ = [
    "PINNED_CAP",
    "STALE_PROPOSAL_DAYS",
    "latest_reviews",
    "staged_section",
    "pinned_order",
    "pinned_sections",
]

#: cap of the ``pinned`` list (reference 4.17 ``DIGEST_PINNED_CAP``), independent of N.
PINNED_CAP = 20
#: a standing proposal whose latest review row is older than this is stale (4.17).
STALE_PROPOSAL_DAYS = 14


def _latest(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("seq") == pl.col("seq").max().over("capsule_id"))


def latest_reviews(reviews: pl.DataFrame) -> pl.DataFrame:
    """The latest review row per capsule (``capsule_id``, ``verdict``, ``at``, ``staged``).

    Examples:
        >>> import datetime as dt, polars as pl
        >>> t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> r = pl.DataFrame({"seq": [1, 2, 3], "at": [t, t, t],
        ...                   "capsule_id": ["cap-1", "cap-1", "cap-2"],
        ...                   "verdict": ["proposed", "ratified", "rejected"]})
        >>> latest_reviews(r).sort("capsule_id").select("capsule_id", "staged").rows()
        [('cap-1', False), ('cap-2', True)]
    """
    return _latest(reviews).select(
        "capsule_id", "verdict", "at", (pl.col("verdict") != "ratified").alias("staged")
    )


def staged_section(reviews: pl.DataFrame, now: _dt.datetime) -> dict | None:
    """``{"proposed", "stale_proposals"}``, or None (omit the key) at zero proposals.

    ``proposed`` counts every review-fenced capsule, store-global (tombstone status is
    not checked); ``stale_proposals`` those whose latest review row's RFC3339 ``at`` text
    sorts before the text of ``now`` minus 14 days (the reference compares text).

    Examples:
        >>> import datetime as dt, polars as pl
        >>> now = dt.datetime(2026, 7, 23, tzinfo=dt.UTC)
        >>> r = pl.DataFrame({"seq": [1, 2], "capsule_id": ["cap-1", "cap-2"],
        ...                   "verdict": ["proposed", "rejected"],
        ...                   "at": [now - dt.timedelta(days=30), now]})
        >>> staged_section(r, now)
        {'proposed': 2, 'stale_proposals': 1}
    """
    fenced = latest_reviews(reviews).filter(pl.col("staged"))
    if fenced.height == 0:
        return None
    cutoff = rfc3339_text(now - _dt.timedelta(days=STALE_PROPOSAL_DAYS))
    stale = fenced.filter(rfc3339(pl.col("at")) < pl.lit(cutoff)).height
    return {"proposed": fenced.height, "stale_proposals": stale}


def pinned_order(scoped: pl.DataFrame) -> pl.DataFrame:
    """The ``pinned`` population before the cap: pinned rows, newest seq first."""
    return scoped.filter(pl.col("pinned")).sort("seq", descending=True)


def pinned_sections(
    scoped: pl.DataFrame,
    scopes: Sequence[str],
    now: _dt.datetime,
    attach: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
) -> dict[str, dict]:
    """``{"pinned": [...], "pinned_total": n}`` per scope (keys omitted when empty).

    The rows are the pinned capsules of the scope's population, newest seq first,
    capped at :data:`PINNED_CAP`, each a headline row (``pinned: true``).
    """
    from memframe.digest.capsules import headline_rows

    pinned = pinned_order(scoped)
    totals = (
        dict(pinned.group_by(SCOPE).len().iter_rows()) if pinned.height else {}
    )
    top = pinned.filter(pl.int_range(pl.len()).over(SCOPE) < PINNED_CAP)
    lists = {scope: headline_rows(part, now, attach=attach) for scope, part in per_scope(top).items()}
    out: dict[str, dict] = {}
    for scope in scopes:
        section: dict = {}
        if lists.get(scope):
            section["pinned"] = lists[scope]
        if totals.get(scope, 0):
            section["pinned_total"] = int(totals[scope])
        out[scope] = section
    return out
