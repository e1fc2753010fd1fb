"""The assembler: one function per family of sections, composed in wire order (4.0)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from memframe.digest import counters, families, ledger, warm
from memframe.digest.capsules import _lists, _totals, capsule_sections, handoff_rows
from memframe.digest.efforts import EffortGraph, open_efforts_sections
from memframe.digest.inputs import DigestInputs, digest_failed
from memframe.digest.planning import (
    mission_sections,
    unanchored_sections,
)
from memframe.digest.scope import (
    explode_roots,
    fence,
    population,
    subtree_roots,
    top_per_scope,
)
from memframe.digest.staged import pinned_sections, staged_section
from memframe.errors import MemframeError
from memframe.graph import cap_projection

__all__ = ["LABEL", "FRAMING", "global_sections", "graph_sections", "subset_sections",
           "kept_values", "compose", "assemble", "assemble_roots"]

LABEL = "ADVISORY_NOT_AUTHORITY"
FRAMING = "DATA"


def _tombstoned(inputs: DigestInputs) -> pl.Series:
    if inputs.tombstoned is not None:
        return inputs.tombstoned
    return inputs.tables["forgets"].get_column("capsule_id").unique().sort()


def _audit_events(inputs: DigestInputs) -> int:
    if inputs.audit_events is not None:
        return inputs.audit_events
    return counters.audit_events(inputs.tables["journal"])


def _family(inputs: DigestInputs, family: str) -> dict:
    """A family of store-wide values: kept by the digest job and current (see
    `memframe.digest.state.kept_families`), or computed now from the tables read."""
    kept = inputs.globals.get(family)
    if kept is not None:
        if family == "graph":
            values = kept.values()  # read on first use
            return {**values, "effort_graph": _kept_efforts(inputs, values)}
        return kept
    if family == "graph":
        return families.graph_values(inputs.tables["relations"], _tombstoned(inputs))
    return families.family_values(family, inputs.optional)


def _kept_efforts(inputs: DigestInputs, kept: dict) -> EffortGraph:
    """The board's graph from kept values: witnessed ids and member lookups from the
    digest job, member counts from the state rows of the epics (the subset holds them)."""
    epics = inputs.state.filter((pl.col("kind") == "epic").fill_null(False))
    stats = epics.select(
        pl.col("id").alias("epic"),
        pl.col("member_total"),
        pl.format("cap-{}", pl.col("newest_member")).alias("newest_member"),
        pl.col("newest_member").alias("newest_member_number"),
    ).filter(pl.col("member_total") > 0).sort("epic")
    return EffortGraph(witnessed=kept["witnessed"], member_stats=stats,
                       members=kept["_reads"])


def graph_sections(inputs: DigestInputs, n: int) -> dict:
    """``relations`` and ``dag``, and what the mission, unanchored and open-effort
    sections read of the graph (``_mission_graph``, ``_dag_projection``, ``_efforts``;
    None when the digest answers those sections from the kept ones)."""
    kept = inputs.kept_sections
    if kept is not None:
        return {"relations": kept["relations"], "dag": kept["dag"], "_mission_graph": None,
                "_dag_projection": None, "_efforts": None}
    graph = _family(inputs, "graph")
    projection = graph["dag_projection"]
    return {"relations": graph["relations"], "dag": cap_projection(projection, n),
            "_mission_graph": graph["mission_graph"], "_dag_projection": projection,
            "_efforts": graph["effort_graph"]}


def global_sections(inputs: DigestInputs, n: int) -> dict:
    """Every store-global section, computed once (fail-closed ones raise)."""
    try:
        tables = inputs.tables
        sessions = inputs.globals.get("sessions")
        if sessions is not None:  # kept by the digest job: every open id, in order
            opened, open_ids = sessions["open_sessions"], sessions["open_session_ids"][:n]
        else:
            opened, open_ids = counters.open_sessions(tables["brackets"], n)
        return {
            **graph_sections(inputs, n),
            "open_sessions": opened,
            "open_session_ids": open_ids,
            "audit_events": _audit_events(inputs),
            **_ledger_sections(inputs),
            "staged": staged_section(tables["reviews"], inputs.now),
            **_fail_open_sections(inputs),
        }
    except MemframeError:
        raise
    except Exception as exc:  # noqa: BLE001 - fail closed with the reference's prefix
        raise digest_failed(exc) from exc


def subset_sections(inputs: DigestInputs, glob: dict, scoped: pl.DataFrame,
                    scopes: Sequence[str], n: int, now, handoff: bool = True
                    ) -> dict[str, dict]:
    """The sections that name subset capsules, per scope: ``handoff``/``handoff_total``
    (with ``handoff``; the full computation takes them from `capsule_sections`),
    ``mission``, ``unanchored`` and ``curated`` (``pinned``, ``pinned_total``,
    ``open_efforts``, ``open_efforts_total``). ``now`` None defers the ``expired`` flags
    (`memframe.digest.capsules.resolve_expired`)."""
    graph = glob["_mission_graph"]
    attach = inputs.attach
    try:
        lists: dict[str, list] = {}
        totals: dict[str, int] = {}
        if handoff:
            handoffs = handoff_rows(scoped)
            totals = _totals(handoffs)
            lists = _lists(top_per_scope(handoffs, n), now, attach=attach)
        missions = mission_sections(scoped, graph, scopes, n, now, attach)
        pinned = pinned_sections(scoped, scopes, now, attach)
        alive = inputs.state.filter(pl.col("status") != "tombstoned")
        lookup = None
        if inputs.warm is not None:  # the state is the subset: members are looked up
            lookup = warm.member_scopes(inputs.warm, scopes[0] or None)
        efforts = open_efforts_sections(
            scoped, alive, glob["_efforts"], glob["_dag_projection"], scopes, n, now, attach,
            lookup,
        )
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    try:
        unanchored = unanchored_sections(scoped, graph, scopes)
    except Exception:  # noqa: BLE001 - advisory nudge: fail open
        unanchored = dict.fromkeys(scopes)
    return {scope: {"handoff": lists.get(scope, []), "handoff_total": totals.get(scope, 0),
                    "mission": missions[scope], "unanchored": unanchored[scope],
                    "curated": {**pinned[scope], **efforts[scope]}}
            for scope in scopes}


def kept_values(inputs: DigestInputs, cap: int) -> dict:
    """What the digest job keeps of the unfenced digest
    (`memframe.digest.state.sections`): the subset sections and ``dag`` for the
    list cap ``cap`` with deferred ``expired`` flags, and ``relations``; `memframe.digest.state.sections.cap_kept` turns
    them into the values for any cap up to ``cap`` and any instant."""
    scoped = fence(population(inputs.state), None)
    glob = graph_sections(inputs, cap)
    values = subset_sections(inputs, glob, scoped, [""], cap, None)[""]
    return {**values, "dag": glob["dag"], "relations": glob["relations"],
            MEMBER_ADMISSION: _member_admission(inputs.state, scoped, glob["_efforts"])}


#: a kept-values key: the unfenced board admits an epic the population does not hold
#: (a staged epic) when a member is in it (0.3.0), and members are not in the subset, so
#: such values are not reused (a member's forget or review changes no subset row)
MEMBER_ADMISSION = "_member_admission"


def _member_admission(state: pl.DataFrame, scoped: pl.DataFrame, graph: EffortGraph) -> bool:
    """Is there an epic outside the unfenced population, not tombstoned, with members?"""
    outside = state.filter((pl.col("kind") == "epic").fill_null(False)
                           & (pl.col("status") != "tombstoned")
                           & ~pl.col("id").is_in(scoped.get_column("id").implode()))
    return bool(outside.filter(pl.col("id").is_in(
        graph.member_stats.get_column("epic").implode())).height)


def _ledger_sections(inputs: DigestInputs) -> dict:
    """tiers, journal and archive_candidates: from the capsule state, or from the digest
    state's aggregates on the warm path."""
    if inputs.warm is not None:
        journal = dict(inputs.chain or {})
        journal["out_of_band"] = warm.warm_out_of_band(inputs.warm)
        return {
            "tiers": warm.warm_tiers(inputs.warm),
            "journal": journal,
            "archive_candidates": warm.warm_archive(inputs, inputs.warm),
        }
    return {
        "tiers": ledger.tiers_section(inputs.state),
        "journal": ledger.journal_section(inputs.tables.get("journal"), inputs.state,
                                          inputs.chain),
        "archive_candidates": ledger.archive_candidates(inputs.state, inputs.now,
                                                        inputs.attach),
    }


def _fail_open_sections(inputs: DigestInputs) -> dict:
    """recall_misses, recent_failures, lane_overrides_total and sources (each None, or
    0 for the miss count, when its table cannot be read or its builder fails)."""
    out: dict = {}
    for family in ("misses", "lanes", "sources"):
        out.update(_family(inputs, family))
    return out


def compose(
    capsules: dict,
    glob: dict,
    mission: dict | None,
    unanchored: int | None,
    fenced: bool,
    curated: dict | None = None,
) -> dict:
    """One digest body, keys in the order and with the omissions of reference 4.0.

    ``curated`` holds the scope's ``pinned``/``pinned_total`` and
    ``open_efforts``/``open_efforts_total`` keys (each present only when non-empty).
    """
    body: dict = {"label": LABEL, "framing": FRAMING}
    body.update(capsules)
    for key in ("relations", "open_sessions", "open_session_ids", "audit_events", "recall_misses"):
        body[key] = glob[key]
    if not fenced and glob["_recent_failures"] is not None:
        body["recent_failures"] = glob["_recent_failures"]
    if glob["lane_overrides_total"]:
        body["lane_overrides_total"] = glob["lane_overrides_total"]
    if glob["sources"] is not None:
        body["sources"] = glob["sources"]
    body["dag"] = glob["dag"]
    if mission is not None:
        body["mission"] = mission
    if unanchored:
        body["unanchored"] = unanchored
    for key in ("tiers", "journal", "archive_candidates"):
        body[key] = glob[key]
    if glob.get("staged") is not None:
        body["staged"] = glob["staged"]
    curated = curated or {}
    for key in ("pinned", "pinned_total", "open_efforts", "open_efforts_total"):
        if key in curated:
            body[key] = curated[key]
    return body


def _bodies(
    inputs: DigestInputs,
    n: int,
    scoped: pl.DataFrame,
    scopes: Sequence[str],
    fenced: bool,
) -> dict[str, dict]:
    glob = global_sections(inputs, n)
    warm_path = inputs.warm is not None
    if inputs.kept_sections is not None:  # the unfenced scope, kept by the digest job
        values = {scopes[0]: inputs.kept_sections}
    else:
        values = subset_sections(inputs, glob, scoped, scopes, n, inputs.now,
                                 handoff=warm_path)
    try:
        if warm_path:
            prefix = scopes[0] if fenced else None
            caps = {scopes[0]: warm.warm_capsule_sections(inputs, inputs.warm,
                                                          values[scopes[0]], n, prefix)}
        else:
            caps = capsule_sections(scoped, scopes, n, inputs.now, inputs.attach)
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    return {
        scope: compose(caps[scope], glob, values[scope]["mission"],
                       values[scope]["unanchored"], fenced, values[scope]["curated"])
        for scope in scopes
    }


def assemble(inputs: DigestInputs, n: int, project_prefix: str | None) -> dict:
    """The digest body for one fence (None = unfenced)."""
    try:
        scoped = fence(population(inputs.state), project_prefix)
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    scope = "" if project_prefix is None else project_prefix
    return _bodies(inputs, n, scoped, [scope], project_prefix is not None)[scope]


def assemble_roots(inputs: DigestInputs, n: int, depth: int) -> dict[str, dict]:
    """Digest bodies for every project subtree root at ``depth``, in one pass.

    Each body equals ``assemble(inputs, n, root)``.
    """
    try:
        alive = population(inputs.state)
        roots = subtree_roots(alive, depth)
        scoped = explode_roots(alive, roots, depth)
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    if not roots:
        return {}
    if inputs.warm is not None:
        raise ValueError("per-project bodies read every capsule's state (read without fast)")
    return _bodies(inputs, n, scoped, roots, True)
