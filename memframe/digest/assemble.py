"""The assembler: one function per family of sections, composed in wire order (4.0)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from memframe.digest.capsules import _lists, _totals, handoff_rows
from memframe.digest.efforts import EffortGraph, open_efforts_sections
from memframe.digest.planning import mission_sections, unanchored_sections
from memframe.digest.reads import digest_failed
from memframe.digest.scope import (
    explode_roots,
    fence,
    population,
    subtree_roots,
    top_per_scope,
)
from memframe.digest.source import DigestSource
from memframe.digest.staged import pinned_sections, staged_section
from memframe.errors import MemframeError

__all__ = ["LABEL", "FRAMING", "global_sections", "subset_sections",
           "kept_values", "compose", "assemble", "assemble_roots"]

LABEL = "ADVISORY_NOT_AUTHORITY"
FRAMING = "DATA"


def global_sections(source: DigestSource, graph: dict, n: int) -> dict:
    """Every store-global section, computed once (fail-closed ones raise); ``graph`` is
    ``source.graph(n)``."""
    try:
        opened, open_ids = source.open_sessions(n)
        return {
            "relations": graph["relations"],
            "dag": graph["dag"],
            "open_sessions": opened,
            "open_session_ids": open_ids,
            "audit_events": source.audit_events(),
            **source.ledger(),
            "staged": staged_section(source.reviews(), source.now),
            **source.fail_open(),
        }
    except MemframeError:
        raise
    except Exception as exc:  # noqa: BLE001 - fail closed with the reference's prefix
        raise digest_failed(exc) from exc


def subset_sections(source: DigestSource, graph: dict, scoped: pl.DataFrame,
                    scopes: Sequence[str], n: int, now) -> dict[str, dict]:
    """The sections that name subset capsules, per scope: ``handoff``/``handoff_total``,
    ``mission``, ``unanchored`` and ``curated`` (``pinned``, ``pinned_total``,
    ``open_efforts``, ``open_efforts_total``). ``now`` None defers the ``expired`` flags
    (`memframe.digest.capsules.resolve_expired`); ``graph`` is ``source.graph(n)``."""
    mission = graph["mission_graph"]
    attach = source.attach
    try:
        handoffs = handoff_rows(scoped)
        totals = _totals(handoffs)
        lists = _lists(top_per_scope(handoffs, n), now, attach=attach)
        missions = mission_sections(scoped, mission, scopes, n, now, attach)
        pinned = pinned_sections(scoped, scopes, now, attach)
        alive = source.state().filter(pl.col("status") != "tombstoned")
        efforts = open_efforts_sections(
            scoped, alive, graph["efforts"], graph["dag_projection"], scopes, n, now, attach,
            source.member_scopes(scopes[0] or None),
        )
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    try:
        unanchored = unanchored_sections(scoped, mission, scopes)
    except Exception:  # noqa: BLE001 - advisory nudge: fail open
        unanchored = dict.fromkeys(scopes)
    return {scope: {"handoff": lists.get(scope, []), "handoff_total": totals.get(scope, 0),
                    "mission": missions[scope], "unanchored": unanchored[scope],
                    "curated": {**pinned[scope], **efforts[scope]}}
            for scope in scopes}


def kept_values(source: DigestSource, cap: int) -> dict:
    """What the digest job keeps of the unfenced digest
    (`memframe.digest.state.sections`): the subset sections and ``dag`` for the
    list cap ``cap`` with deferred ``expired`` flags, and ``relations``; `memframe.digest.state.sections.cap_kept` turns
    them into the values for any cap up to ``cap`` and any instant."""
    state = source.state()
    scoped = fence(population(state), None)
    graph = source.graph(cap)
    values = subset_sections(source, graph, scoped, [""], cap, None)[""]
    return {**values, "dag": graph["dag"], "relations": graph["relations"],
            MEMBER_ADMISSION: _member_admission(state, scoped, graph["efforts"])}


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


def _with_handoffs(caps: dict, values: dict) -> dict:
    """A scope's capsule sections with its handoffs, keys in wire order (4.0)."""
    out = {"total": caps["total"], "by_project": caps["by_project"]}
    if values["handoff"]:
        out["handoff"] = values["handoff"]
    if values["handoff_total"]:
        out["handoff_total"] = values["handoff_total"]
    out.update((k, v) for k, v in caps.items() if k not in out)
    return out


def _bodies(source: DigestSource, n: int, scoped: pl.DataFrame, scopes: Sequence[str],
            fenced: bool) -> dict[str, dict]:
    graph = source.graph(n)
    glob = global_sections(source, graph, n)
    kept = source.kept_sections()
    if kept is not None:  # the unfenced scope, as the digest job kept it
        values = {scopes[0]: kept}
    else:
        values = subset_sections(source, graph, scoped, scopes, n, source.now)
    try:
        caps = source.capsule_sections(scoped, scopes, n)
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    return {
        scope: compose(_with_handoffs(caps[scope], values[scope]), glob,
                       values[scope]["mission"], values[scope]["unanchored"], fenced,
                       values[scope]["curated"])
        for scope in scopes
    }


def assemble(source: DigestSource, n: int, project_prefix: str | None) -> dict:
    """The digest body for one fence (None = unfenced)."""
    try:
        scoped = fence(population(source.state()), project_prefix)
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    scope = "" if project_prefix is None else project_prefix
    return _bodies(source, n, scoped, [scope], project_prefix is not None)[scope]


def assemble_roots(source: DigestSource, n: int, depth: int) -> dict[str, dict]:
    """Digest bodies for every project subtree root at ``depth``, in one pass; each
    equals ``assemble(source, n, root)``. The source's state holds every capsule
    (`memframe.digest.reads.whole_source`)."""
    try:
        alive = population(source.state())
        roots = subtree_roots(alive, depth)
        scoped = explode_roots(alive, roots, depth)
    except Exception as exc:  # noqa: BLE001
        raise digest_failed(exc) from exc
    if not roots:
        return {}
    return _bodies(source, n, scoped, roots, True)
