"""The warm digest: the capsule sections answered from the digest state's aggregates, its
subset and its top-N readers (`memframe.digest.state.warm_reader.WarmState`), never from every
capsule row: totals, tiers, coverage misses and archive candidates from the aggregates;
the subset sections by the reference section functions over the subset (or as the digest
job kept them); ``newest`` and ``most_recalled`` from the leaders or the state's row
groups. Every other section is the reference's own; the answer is byte-identical to it.
"""

from __future__ import annotations

import polars as pl

from memframe.digest.capsules import headline_rows
from memframe.digest.scope import SCOPE, fence, fence_expr, population
from memframe.digest.state import digest_aggregates, digest_capsules, warm_reader
from memframe.schema import TIERS
from memframe.state import KEY, STATE_SCHEMA, population_expr, state_columns, state_frame
from memframe.text import rfc3339

__all__ = ["warm_capsule_sections", "top_requests", "warm_tiers", "warm_out_of_band",
           "warm_archive", "member_scopes"]


def _capsule_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """State rows -> capsule-state rows, order kept."""
    return rows.select(state_columns())


def warm_capsule_sections(inputs, warm: warm_reader.WarmState, subset: dict, n: int,
                          prefix: str | None) -> dict:
    """The five fenced capsule sections (keys and omissions as `capsule_sections`);
    ``subset``: the scope's `memframe.digest.assemble.subset_sections` (its handoffs)."""
    now, attach = inputs.now, inputs.attach
    sums = warm.sums
    projects = sorted({key for metric, key in sums if metric in ("count", "live", "recalled")})
    if prefix is not None:
        projects = pl.Series("project_id", projects, dtype=pl.String).to_frame().filter(
            fence_expr(prefix)).get_column("project_id").to_list()
    table: list[tuple[str, int, int, int]] = [
        (p, sums.get(("count", p), 0), sums.get(("live", p), 0), sums.get(("recalled", p), 0))
        for p in projects]
    by_project = [{"project_id": p, "count": c, "live": live}
                  for p, c, live, _r in table if c > 0]
    total = sum(row[1] for row in table)
    recalled_total = sum(row[3] for row in table)

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


def top_requests(n: int, prefix: str | None) -> tuple[warm_reader.TopRequest, ...]:
    """The top-N requests of `warm_capsule_sections` (``newest``, ``most_recalled``) for
    the list cap ``n`` and the fence ``prefix``: what a cold fold keeps candidates of.

    Examples:
        >>> [order for _n, order, _keep in top_requests(3, "team")]
        ['newest', 'recalled']
    """
    keep = population_expr()
    if prefix is not None:
        keep = keep & fence_expr(prefix)
    return ((n, "newest", keep),
            (n, "recalled", keep & pl.col("last_recalled_at").is_not_null()))


def warm_tiers(warm: warm_reader.WarmState) -> dict:
    """``tiers`` from the store-wide aggregates."""
    return {tier: warm.sums.get(("tier", tier), 0) for tier in TIERS}


def warm_out_of_band(warm: warm_reader.WarmState) -> int:
    """The journal's coverage misses from the store-wide aggregates."""
    return warm.sums.get(("oob", ""), 0)


def warm_archive(inputs, warm: warm_reader.WarmState) -> int:
    """``archive_candidates``: the candidates whose instant is at or before ``now`` (the
    quarantine guard was applied when each capsule was folded): the stored running total
    at ``now`` plus the changes of the rows above the watermark."""
    from memframe.schema import TIMESTAMP

    now = pl.lit(inputs.now).cast(TIMESTAMP)
    timed = warm.aggregates.filter((pl.col("metric") == "archive") & (pl.col("at") <= now))
    stored = 0
    if not warm.in_memory:
        stored, read = digest_aggregates.archive_at(warm.view, inputs.now)
        warm.rows_visited += read
    return stored + int(timed["n"].sum() or 0)


def member_scopes(warm: warm_reader.WarmState, prefix: str | None):
    """The ``member_scopes`` lookup of `memframe.digest.efforts.open_efforts_sections` on
    the warm path, whose state holds the subset only: the state rows of the capsules asked
    (stored rows by capsule number, the rows touched since the watermark as folded now),
    fenced as the digest's population. A cold fold that kept only the top-N candidates
    reads what the population needs of them (project, forget, latest review) from their
    source rows."""
    from memframe.ids import capsule_number_expr

    def lookup(ids: pl.Series) -> pl.DataFrame:
        nums = (ids.to_frame("id").select(capsule_number_expr("id").alias(KEY))
                .get_column(KEY).drop_nulls().unique().sort())
        if warm.in_memory and warm.tops is not None:
            return _population_of(warm.view, ids, prefix)
        # the population needs no text: the rows' text columns stay unknown (null)
        if warm.in_memory:  # every state row was folded
            rows = digest_capsules.with_text(warm.merged.filter(pl.col(KEY).is_in(nums.implode())))
        else:
            touched = nums.filter(nums.is_in(warm.touched.implode()))
            stored, n = digest_capsules.state_runs().read_keys(
                warm.view, nums.filter(~nums.is_in(warm.touched.implode())).to_list())
            warm.rows_visited += n
            rows = pl.concat([
                digest_capsules.with_text(stored).select(list(STATE_SCHEMA)),
                digest_capsules.with_text(warm.merged.filter(pl.col(KEY).is_in(touched.implode())))
                .select(list(STATE_SCHEMA))], how="vertical")
        return fence(population(state_frame(rows)), prefix).select("id", SCOPE)

    return lookup


def _population_of(view, ids: pl.Series, prefix: str | None) -> pl.DataFrame:
    """``(id, _scope)`` of those of ``ids`` in the fenced population, from source rows."""
    from memframe.digest.staged import latest_reviews

    wanted = ids.implode()
    caps = (view.table("capsules").filter(pl.col("id").is_in(wanted))
            .select("seq", "id", "project_id").collect())
    forgotten = (view.table("forgets").filter(pl.col("capsule_id").is_in(wanted))
                 .select("capsule_id").collect().get_column("capsule_id"))
    reviews = (view.table("reviews").filter(pl.col("capsule_id").is_in(wanted))
               .select("seq", "at", "capsule_id", "verdict").collect())
    staged = latest_reviews(reviews).filter(pl.col("staged")).get_column("capsule_id")
    held = caps.filter(~pl.col("id").is_in(forgotten.implode())
                       & ~pl.col("id").is_in(staged.implode()))
    return fence(held, prefix).select("id", SCOPE)

