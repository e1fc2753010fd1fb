"""The warm digest: the sections answered from the digest state's aggregates, its subset
and its top-N readers (`memframe.digest.state.capsules.WarmState`), never from every
capsule row.

* ``total``, ``by_project``, ``newest_total`` and ``most_recalled_total``: the per-project
  aggregates, summed over the projects the fence holds;
* ``tiers``, the journal's ``out_of_band`` and ``archive_candidates``: the store-wide
  aggregates (archive candidates by the instant each became one);
* ``handoff``, ``mission``, ``unanchored``, ``pinned`` and ``open_efforts``: the section
  functions of the full computation, run over the subset (every row those sections can
  name is in it), or, unfenced, as the digest job kept them
  (`memframe.digest.state.sections`) while nothing they read has changed;
* ``newest`` and ``most_recalled``: the first N rows read from the state levels in the
  order of their row-group statistics.

Every other section is the full computation's own (its tables are read in full). The
answer is byte-identical to the full computation; the law tests compare them.
"""

from __future__ import annotations

import polars as pl

from memframe.digest.capsules import headline_rows
from memframe.digest.scope import fence_expr
from memframe.digest.state import capsules as ds
from memframe.schema import TIERS
from memframe.text import rfc3339

__all__ = ["warm_capsule_sections", "top_requests", "warm_tiers", "warm_out_of_band",
           "warm_archive"]


def _capsule_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """State rows -> capsule-state rows, order kept."""
    return rows.select(ds.state_columns())


def warm_capsule_sections(inputs, warm: ds.WarmState, subset: dict, n: int,
                          prefix: str | None) -> dict:
    """The five fenced capsule sections (keys and omissions as `capsule_sections`);
    ``subset``: the scope's `memframe.digest.assemble.subset_sections` (its handoffs)."""
    now, attach = inputs.now, inputs.attach
    per_project = warm.aggregates.filter(
        pl.col("metric").is_in(["count", "live", "recalled"])).rename({"key": "project_id"})
    if prefix is not None:
        per_project = per_project.filter(fence_expr(prefix))
    table = (per_project.pivot("metric", index="project_id", values="n",
                               aggregate_function="sum")
             if per_project.height else pl.DataFrame(schema={"project_id": pl.String}))
    for column in ("count", "live", "recalled"):
        if column not in table.columns:
            table = table.with_columns(pl.lit(0, dtype=pl.Int64).alias(column))
    table = table.with_columns(pl.col("count", "live", "recalled").fill_null(0).cast(pl.Int64))
    by_project = (table.filter(pl.col("count") > 0).sort("project_id")
                  .select("project_id", "count", "live").to_dicts())
    total = int(table["count"].sum() or 0)
    recalled_total = int(table["recalled"].sum() or 0)

    (_n, _newest, keep), (_n, _recalled, recalled_keep) = top_requests(n, prefix)
    # the aggregates say how many rows qualify: a reader stops once it has them all
    newest = _capsule_rows(warm.top_rows(keep, n, "newest", total))
    recalled = _capsule_rows(warm.top_rows(recalled_keep, n, "recalled", recalled_total))
    section: dict = {"total": total, "by_project": by_project}
    if subset["handoff"]:
        section["handoff"] = subset["handoff"]
    if subset["handoff_total"]:
        section["handoff_total"] = subset["handoff_total"]
    section["newest"] = headline_rows(newest, now, attach=attach)
    if total:
        section["newest_total"] = total
    section["most_recalled"] = headline_rows(
        recalled, now,
        extra=(("recall_count", pl.col("recall_count").cast(pl.Int64)),
               ("last_recalled_at", rfc3339(pl.col("last_recalled_at")))),
        attach=attach,
    )
    if recalled_total:
        section["most_recalled_total"] = recalled_total
    return section


def top_requests(n: int, prefix: str | None) -> tuple[ds.TopRequest, ...]:
    """The top-N requests of `warm_capsule_sections` (``newest``, ``most_recalled``) for
    the list cap ``n`` and the fence ``prefix``: what a cold fold keeps candidates of.

    Examples:
        >>> [order for _n, order, _keep in top_requests(3, "team")]
        ['newest', 'recalled']
    """
    keep = ds.population_expr()
    if prefix is not None:
        keep = keep & fence_expr(prefix)
    return ((n, "newest", keep),
            (n, "recalled", keep & pl.col("last_recalled_at").is_not_null()))


def warm_tiers(warm: ds.WarmState) -> dict:
    """``tiers`` from the store-wide aggregates."""
    rows = warm.aggregates.filter(pl.col("metric") == "tier").group_by("key").agg(
        pl.col("n").sum())
    found = dict(zip(rows["key"].to_list(), rows["n"].to_list(), strict=True))
    return {tier: int(found.get(tier, 0)) for tier in TIERS}


def warm_out_of_band(warm: ds.WarmState) -> int:
    """The journal's coverage misses from the store-wide aggregates."""
    return int(warm.aggregates.filter(pl.col("metric") == "oob")["n"].sum() or 0)


def warm_archive(inputs, warm: ds.WarmState) -> int:
    """``archive_candidates``: the candidates whose instant is at or before ``now`` (the
    quarantine guard was applied when each capsule was folded): the stored running total
    at ``now`` plus the changes of the rows above the watermark."""
    from memframe.schema import TIMESTAMP

    now = pl.lit(inputs.now).cast(TIMESTAMP)
    timed = warm.aggregates.filter((pl.col("metric") == "archive") & (pl.col("at") <= now))
    stored = 0
    if not warm.in_memory:
        stored, read = ds.archive_at(warm.view, inputs.now)
        warm.rows_visited += read
    return stored + int(timed["n"].sum() or 0)
