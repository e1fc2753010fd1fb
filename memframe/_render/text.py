"""Terminal text reports: the digest and the recall-miss audit.

Stored text is shown through :func:`memframe._render.html.label` (control characters made
visible), so a hostile headline or term cannot drive the terminal.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

import polars as pl

from memframe._render.html import label
from memframe._render.terminal import instant_text, visible
from memframe._scalars import as_int

__all__ = ["digest_text", "audit_text", "audit_summary", "audit_window", "plural"]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``n`` and the word, plural unless ``n == 1``.

    Examples:
        >>> plural(1, "miss", "misses"), plural(2, "day")
        ('1 miss', '2 days')
    """
    return f"{n:,} " + (word if n == 1 else (many or word + "s"))


def _when(value: Any) -> str:
    return instant_text(value)


def digest_text(body: Mapping[str, Any], *, generation: int, digest_hash: str) -> str:
    """The digest as a readable terminal report.

    Examples:
        >>> print(digest_text({"unchanged": True}, generation=4, digest_hash="ab" * 32))
        memframe digest  generation 4  hash abababababab
        unchanged (the known hash matches): no bodies
    """
    lines = [f"memframe digest  generation {generation}  hash {digest_hash[:12]}"]
    if body.get("unchanged"):
        lines.append("unchanged (the known hash matches): no bodies")
        return "\n".join(lines)
    lines.append(f"{body['total']:,} capsules in {len(body['by_project'])} project(s)")
    width = max((len(label(r["project_id"], 32)) for r in body["by_project"]), default=10)
    for row in body["by_project"]:
        lines.append(f"  {label(row['project_id'], 32):<{width}}  count {row['count']:>7,}  "
                     f"live {row['live']:>7,}")
    staged = body.get("staged") or {}
    if staged.get("proposed"):
        stale = staged.get("stale_proposals", 0)
        lines.append(f"  and {staged['proposed']:,} staged for review (proposed, not yet "
                     f"ratified: outside every count and list here"
                     + (f"; {stale:,} of them stale)" if stale else ")"))
    for key, title in (("handoff", "handoffs"), ("pinned", "pinned"), ("newest", "newest"),
                       ("most_recalled", "most recalled")):
        rows = body.get(key) or []
        if not rows:
            continue
        total = body.get(f"{key}_total", len(rows))
        lines.append("")
        counted = "recall_count" in rows[0]
        # what orders a list and what flags a row come before the headline, so that a
        # narrow terminal cuts the headline (the last column), never the count or the flag
        order = {"newest": ", the last written first (created_at may differ)",
                 "most_recalled": ", recalls before the headline"}.get(key, "")
        lines.append(f"{title} ({len(rows)} of {total:,}){order}:")
        idw = max(len(r["id"]) for r in rows)
        pw = max(len(label(r["project_id"], 20)) for r in rows)
        cw = max((len(f"{r['recall_count']:,}") for r in rows if "recall_count" in r),
                 default=0)
        for r in rows:
            count = f"{r['recall_count']:>{cw},}  " if counted else ""
            taint = "[taint] " if r.get("instruction_taint") else ""
            lines.append(f"  {visible(str(r['id'])):<{idw}}  {_when(r.get('created_at'))}  "
                         f"{label(r['project_id'], 20):<{pw}}  {count}{taint}"
                         f"{label(r['headline'], 72)}")
    lines.append("")
    lines.append(f"relations {body['relations']:,}  open sessions {body['open_sessions']:,}  "
                 f"audit events {body['audit_events']:,}  "
                 f"recall misses {body['recall_misses']:,}")
    dag = body["dag"]
    if dag["status"] == "ok":
        lines.append(f"dag ok: ready {dag['ready_total']}, blocked {dag['blocked_total']}, "
                     f"done {dag['done_total']}")
    else:
        lines.append(f"dag CYCLE: {' -> '.join(visible(str(i)) for i in dag['cycle'])} "
                     f"(entangled {dag['entangled_total']})")
    if "mission" in body:
        m = body["mission"]
        lines.append(f"mission {m['status']}: " + (
            ", ".join(f"{visible(str(r['id']))} ({r['children']} children)" for r in m["roots"])
            if m["status"] == "ok" else " -> ".join(visible(str(i)) for i in m["cycle"])))
    tiers, journal = body["tiers"], body["journal"]
    lines.append(f"tiers active {tiers['active']:,} archived {tiers['archived']:,} "
                 f"quarantined {tiers['quarantined']:,}  journal {journal['chain']}  "
                 f"archive candidates {body['archive_candidates']:,}")
    return "\n".join(lines)


def audit_window(since: datetime.datetime | None, until: datetime.datetime | None) -> str:
    """The audit window in words, in the one instant format of every report.

    Examples:
        >>> audit_window(None, None)
        'all time'
        >>> audit_window(datetime.datetime(2026, 7, 1, tzinfo=datetime.UTC), None)
        'from 2026-07-01 00:00:00Z until now (exclusive)'
    """
    if since is None and until is None:
        return "all time"
    first = instant_text(since) if since else "the beginning"
    last = instant_text(until) if until else "now"
    return f"from {first} until {last} (exclusive)"


def audit_summary(generation: int, totals: Mapping[str, int]) -> str:
    """The audit's one-line summary.

    Examples:
        >>> audit_summary(3, {"misses": 1, "terms": 2, "days_with_misses": 1})
        'recall-miss audit, generation 3: 1 miss of 2 terms on 1 day'
    """
    return (f"recall-miss audit, generation {generation}: "
            f"{plural(totals['misses'], 'miss', 'misses')} of {plural(totals['terms'], 'term')}"
            f" on {plural(totals['days_with_misses'], 'day')}")


def audit_text(*, summary: str, window: str, totals: Mapping[str, int], terms: pl.DataFrame,
               aliases: pl.DataFrame, daily: pl.DataFrame, lane_daily: pl.DataFrame,
               recurring_days: int, per_term: int, limit: int = 20, days: int = 31) -> str:
    """The recall-miss audit as a plain-text report: at most ``limit`` terms, ``limit``
    times ``per_term`` alias proposals and the last ``days`` days, each list saying how
    many it shows of how many (the JSON report holds every row).

    Examples:
        >>> print(audit_text(summary="s", window="all time",
        ...                  totals={"misses": 0, "lane_overrides": 0}, terms=pl.DataFrame(),
        ...                  aliases=pl.DataFrame(), daily=pl.DataFrame(),
        ...                  lane_daily=pl.DataFrame(), recurring_days=2, per_term=3))
        s
        window: all time
        no recall misses recorded
    """
    t = totals
    lines = [summary, f"window: {window}"]
    if t["misses"] == 0 and t["lane_overrides"] == 0:
        lines.append("no recall misses recorded")
        return "\n".join(lines)
    lines.append(f"outcomes: abstain {t['abstain']:,}, missing_evidence "
                 f"{t['missing_evidence']:,}")
    lines.append(f"recurring terms (missed on {recurring_days}+ days): {t['recurring_terms']:,}")
    lines.append(f"terms the store's vocabulary lacks: {t['unknown_terms']:,} "
                 f"({t['terms_with_alias']:,} with an alias proposal)")
    lines.append(f"lane overrides: {t['lane_overrides']:,}")
    if terms.height:
        lines += ["", f"top missed terms ({min(limit, terms.height)} of {terms.height:,}; "
                      f"days*: recurring)",
                  f"  {'term':<20}  {'misses':>6}  {'days':>5}  {'last seen':<20}  alias"]
        for row in terms.head(limit).iter_rows(named=True):
            note = (f"-> {label(row['alias'], 24)}" if row["alias"] is not None
                    else "" if row["in_vocabulary"] else "(in no capsule)")
            on_days = f"{row['days']}{'*' if row['recurring'] else ' '}"
            lines.append(
                f"  {label(row['term'], 20):<20}  {row['misses']:>6,}  {on_days:>5}  "
                f"{_when(row['last_seen']):<20}  {note}".rstrip())
        if terms.height > limit:
            lines.append(f"  … {terms.height - limit:,} more (the JSON report lists every "
                         f"term)")
    if aliases.height:
        shown = aliases.head(limit)
        lines += ["", f"alias proposals ({shown.height:,} of {aliases.height:,}; up to "
                      f"{per_term} per term)",
                  "  missed term -> vocabulary term: distance, live capsules, misses explained"]
        for row in shown.iter_rows(named=True):
            explained = (f", explains {plural(row['misses_explained'], 'miss', 'misses')}"
                         if "misses_explained" in row else "")
            lines.append(f"  {label(row['term'], 40)} -> {label(row['alias'], 40)}: "
                         f"{row['distance']}, {plural(row['capsules'], 'capsule')}{explained}")
        if aliases.height > shown.height:
            lines.append(f"  … {aliases.height - shown.height:,} more (the JSON report lists "
                         f"every proposal)")
    if daily.height:
        recent = daily.tail(days)
        lines += ["", "misses per day (UTC)" + (
            f", the last {recent.height:,} of {daily.height:,} days" if recent.height <
            daily.height else "")]
        top = max(as_int(recent.get_column("misses").max() or 1), 1)
        for row in recent.iter_rows(named=True):
            bar = "#" * max(0, round(40 * row["misses"] / top))
            lines.append(f"  {row['day']:%Y-%m-%d} {row['misses']:>6,} {bar}")
    if t["lane_overrides"]:
        lines += ["", "lane overrides (forced -> auto pick)"]
        pairs = lane_daily.group_by("forced", "auto_pick", maintain_order=True).agg(
            pl.col("overrides").sum())
        for forced, auto, count in pairs.iter_rows():
            lines.append(f"  {label(forced, 20)} -> {label(auto, 20)}: {count:,}")
    return "\n".join(lines)
