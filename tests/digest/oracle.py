"""An independent oracle of the digest's wire body: the reference
(``spec/digest-reference.md``) read clause by clause and computed over the canonical tables
with plain Python (dicts, lists, ``sorted``), written from the text alone, without reading
``memframe.digest``, so that a misreading shared by the package's two paths (warm and full)
shows up as a disagreement here (`tests.digest.test_oracle`).

Mapping of the reference engine's side tables to memframe's event tables (DESIGN.md s.2):
  capsules.canonical_json IS NULL  -> a `forgets` row exists for the capsule (tombstoned)
  usage(recall_count, last_recalled_at) -> recalls: sum(count), max(at)
  classifications / tiers           -> latest row by seq
  sessions                          -> brackets (start/finish events)
  audit_events                      -> journal (audit_seq is the engine's seq)
  review_events / pin_events        -> reviews / pins (latest by seq)
  source_cursors                    -> latest row per source_key
Plain Python only; the one borrowed piece is memframe.taint.scan (the reference names its
seven rules but does not spell them out: 4.15).

Examples:
    >>> import datetime as dt
    >>> now = dt.datetime(2026, 7, 1, tzinfo=dt.UTC)
    >>> empty = {name: [] for name in ("capsules", "relations", "forgets", "reviews", "tiers",
    ...     "classifications", "pins", "recalls", "brackets", "journal", "recall_misses",
    ...     "lane_overrides", "source_cursors", "corroborations")}
    >>> body = oracle_digest(empty, now, None, 10)
    >>> body["total"], body["journal"], body["dag"]["status"]
    (0, {'chain': 'ok', 'verified': 0, 'out_of_band': 0}, 'ok')
"""

from __future__ import annotations

import datetime as dt
import hashlib
import heapq
import json
from collections import defaultdict

HANDOFF_SOURCE = "memory_session_finish"
FORGET_ACTIONS = ("memory_forget", "memory_merge")
LANE_PAIRS = {("term", "fused"), ("vector", "fused"), ("vector", "term"), ("fused", "term")}
MISS_OUTCOMES = {"missing_evidence", "abstain"}
RECENT_MISSES_N = 5
DIGEST_PINNED_CAP = 20
ARCHIVE_AFTER_DAYS = 180
STALE_PROPOSAL_DAYS = 14


# ---- 2.5 timestamps: RFC3339, Z, fractional part only when non-zero, trailing zeros trimmed
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _ns(t) -> int | None:
    """An instant as integer ns since the epoch (tables are loaded with ns ints: load_tables)."""
    if t is None or isinstance(t, int):
        return t
    return ((t - _EPOCH) // dt.timedelta(microseconds=1)) * 1000


def rfc3339(t) -> str:
    t = _ns(t)
    sec, frac = divmod(t, 10**9)
    s = (_EPOCH + dt.timedelta(seconds=sec)).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        s += "." + f"{frac:09d}".rstrip("0")
    return s + "Z"


def load_tables(view) -> dict:
    """Rows of every canonical table, with each Datetime column as integer ns (Python
    datetimes would drop the nanoseconds an import keeps). Loading only; no computation."""
    import polars as pl

    from memframe.schema import CANONICAL_TABLES
    out = {}
    for name in CANONICAL_TABLES:
        frame = view.table(name).collect()
        frame = frame.with_columns([pl.col(c).dt.epoch("ns") for c, t in frame.schema.items()
                                    if isinstance(t, pl.Datetime)])
        out[name] = frame.to_dicts()
    return out


# ---- 2.7 headline law
_BOUNDARIES = ("\n", "\r", "\x0b", "\x0c", "\x85", "\u2028", "\u2029")


def headline_of(content: str) -> str:
    cut = None
    width = 0
    for i, ch in enumerate(content):
        if ch in _BOUNDARIES:
            cut = i
            width = 2 if content[i:i + 2] == "\r\n" else 1  # CRLF wins over CR then LF
            break
    if cut is None:
        first, more = content, False
    else:
        first, more = content[:cut], len(content) > cut + width
    h = first[:140]
    if len(first) > 140 or more:
        h += "\u2026"
    return h


# ---- 2.3 thread handoff label
def active_thread_label(content: str | None) -> str | None:
    if content is None or not content.startswith("ACTIVE("):
        return None
    j = content.find(")", len("ACTIVE("))
    if j < 0:
        return None
    return content[len("ACTIVE("):j]


# ---- 1.1 prefix matching
def prefix_match(project_id: str, p: str | None) -> bool:
    return p is None or project_id == p or project_id.startswith(p + "/")


# ---- 4.7 fold (closed diacritic table)
_FOLD_SRC = {
    "a": "àáâãäåāăą", "c": "çćĉċč", "d": "ď", "e": "èéêëēĕėęě", "g": "ĝğġģ", "h": "ĥ",
    "i": "ìíîïĩīĭįı", "j": "ĵ", "k": "ķ", "l": "ĺļľł", "n": "ñńņň", "o": "òóôõöøōŏő",
    "r": "ŕŗř", "s": "śŝşš", "t": "ţť", "u": "ùúûüũūŭůűų", "w": "ŵ", "y": "ýÿ", "z": "źżž",
}
_FOLD = {ch: base for base, chars in _FOLD_SRC.items() for ch in chars}
assert len(_FOLD) == 82, len(_FOLD)


def fold(term: str) -> str:
    return "".join(_FOLD.get(ch, ch) for ch in term.strip().lower())


def _latest(rows, key):
    """latest row by seq per key (a 'latest row wins' rule)."""
    out = {}
    for r in sorted(rows, key=lambda r: r["seq"]):
        out[key(r)] = r
    return out


def _capnum(cid: str) -> int:
    return int(cid.split("-", 1)[1])


def _take(lst, n):
    return lst[:n]


def _kahn_cycle(active: set[str], preds: dict[str, set[str]], succs: dict[str, set[str]]):
    """4.10: Kahn over active nodes (indeg = live predecessors); leftover and find_cycle."""
    indeg = {x: len(preds.get(x, ())) for x in active}
    heap = [x for x in active if indeg[x] == 0]
    heapq.heapify(heap)
    popped = set()
    while heap:
        x = heapq.heappop(heap)
        popped.add(x)
        for t in succs.get(x, ()):
            if t in active:  # targets that are dead/done are ignored
                indeg[t] -= 1
                if indeg[t] == 0:
                    heapq.heappush(heap, t)
    leftover = {x for x in active if indeg[x] > 0}
    if not leftover:
        return leftover, None
    # find_cycle: start at the smallest leftover id, step to the smallest predecessor in leftover
    path = [min(leftover)]
    seen = {path[0]: 0}
    while True:
        cur = path[-1]
        nxt = min(p for p in preds[cur] if p in leftover)
        if nxt in seen:
            loop = path[seen[nxt]:]
            break
        seen[nxt] = len(path)
        path.append(nxt)
    fwd = list(reversed(loop))  # each element precedes (blocks) the next
    i = fwd.index(min(fwd))
    return leftover, fwd[i:] + fwd[:i]


def oracle_digest(tables: dict, now: dt.datetime, project_prefix: str | None,
                  headlines: int) -> dict:
    N = headlines
    now = _ns(now)
    caps = sorted(tables["capsules"], key=lambda r: r["seq"])
    by_id = {c["id"]: c for c in caps}
    rels = tables["relations"]

    # 2.1 tombstoned: a forgets row exists (canonical_json IS NULL in the engine)
    tombstoned = {f["capsule_id"] for f in tables["forgets"]}
    # 2.1 superseded: some supersedes edge names it as to_id (who supersedes does not matter)
    superseded_ids = {r["to_id"] for r in rels if r["kind"] == "supersedes"}
    # 2.1 staged: latest review verdict != ratified
    latest_review = _latest(tables["reviews"], lambda r: r["capsule_id"])
    staged = {cid for cid, r in latest_review.items() if r["verdict"] != "ratified"}
    # 2.1 effective tier: latest tier row, else active
    tier_of = {cid: r["tier"] for cid, r in _latest(tables["tiers"], lambda r: r["capsule_id"]).items()}
    # 2.2 kind: latest classification
    kind_of = {cid: r["kind"] for cid, r in
               _latest(tables["classifications"], lambda r: r["capsule_id"]).items()}
    # 2.2 pinned: latest pin row pinned
    pinned_set = {cid for cid, r in _latest(tables["pins"], lambda r: r["capsule_id"]).items()
                  if r["pinned"]}
    # 4.5 usage: recall_count = sum(count), last_recalled_at = max(at)
    usage: dict[str, list] = {}
    for r in tables["recalls"]:
        u = usage.setdefault(r["capsule_id"], [0, None])
        u[0] += r["count"]
        u[1] = _ns(r["at"]) if u[1] is None or _ns(r["at"]) > u[1] else u[1]

    # 4.16 / 4.0 headline row builder
    def headline(c, superseded=None):
        cid = c["id"]
        row = {"id": cid, "project_id": c["project_id"],
               "instruction_taint": bool(c["instruction_taint"]),
               "created_at": rfc3339(c["created_at"]),
               "headline": headline_of(c["content"] if c["content"] is not None else "")}
        tier = tier_of.get(cid, "active")
        if tier != "active":
            row["tier"] = tier
        if c["valid_to"] is not None and now > _ns(c["valid_to"]):  # 2.1 expired, strictly later
            row["expired"] = True
        if cid in kind_of:
            row["kind"] = kind_of[cid]
        sup = (cid in superseded_ids) if superseded is None else superseded
        if sup:
            row["superseded"] = True
        if cid in pinned_set:
            row["pinned"] = True
        return row

    # 4.1 population
    fenced = [c for c in caps if c["id"] not in tombstoned
              and prefix_match(c["project_id"], project_prefix)]
    all_ = [c for c in fenced if c["id"] not in staged]
    live_map = {c["id"]: c for c in caps if c["id"] not in tombstoned}  # unfenced, staged incl.

    out: dict = {"label": "ADVISORY_NOT_AUTHORITY", "framing": "DATA"}
    # 4.2 total, by_project
    out["total"] = len(all_)
    groups: dict[str, list] = defaultdict(list)
    for c in all_:
        groups[c["project_id"]].append(c)
    out["by_project"] = [
        {"project_id": p, "count": len(g), "live": sum(1 for c in g if c["id"] not in superseded_ids)}
        for p, g in sorted(groups.items(), key=lambda kv: kv[0].encode())]

    # 4.3 handoff
    keys = set()
    hand = []
    htotal = 0
    for c in reversed(all_):
        thread = active_thread_label(c["content"])
        bracket = c["source"] == HANDOFF_SOURCE
        if not bracket and thread is None:
            continue
        sup = c["id"] in superseded_ids
        if sup and not bracket:
            continue
        key = (c["project_id"], thread)
        if key in keys:
            continue
        keys.add(key)
        htotal += 1
        if len(hand) < N:
            hand.append(headline(c, superseded=sup))
    if hand:
        out["handoff"] = hand
    if htotal:
        out["handoff_total"] = htotal

    # 4.4 newest
    out["newest"] = [headline(c) for c in list(reversed(all_))[:N]]
    if all_:
        out["newest_total"] = len(all_)

    # 4.5 most_recalled
    rec = [(usage[c["id"]][0], usage[c["id"]][1], c) for c in all_ if c["id"] in usage]
    rec.sort(key=lambda t: t[2]["seq"])
    rec.sort(key=lambda t: (t[0], t[1]), reverse=True)
    mr = []
    for cnt, last, c in rec[:N]:
        row = headline(c)
        row["recall_count"] = cnt
        row["last_recalled_at"] = rfc3339(last)
        mr.append(row)
    out["most_recalled"] = mr
    if rec:
        out["most_recalled_total"] = len(rec)

    # 4.6 store-global counters
    out["relations"] = len(rels)
    sessions: dict[str, dict] = {}
    for b in sorted(tables["brackets"], key=lambda r: r["seq"]):
        s = sessions.setdefault(b["session_id"], {"started_at": None, "finished": False})
        if b["event"] == "start":
            s["started_at"] = rfc3339(b["at"])
        elif b["event"] == "finish":
            s["finished"] = True
    open_ids = [sid for sid, s in sessions.items() if not s["finished"]]
    open_ids.sort(key=lambda sid: ((sessions[sid]["started_at"] or "").encode(), sid.encode()))
    out["open_sessions"] = len(open_ids)
    out["open_session_ids"] = open_ids[:N]
    out["audit_events"] = len(tables["journal"])

    # 4.7 recall_misses / recent_failures
    misses = tables["recall_misses"]
    out["recall_misses"] = len(misses)
    if project_prefix is None and misses:
        newest5 = sorted(misses, key=lambda r: r["seq"], reverse=True)[:RECENT_MISSES_N]
        ok = all(r["seq"] > 0 and r["term"] and any(ch.isalnum() for ch in r["term"])
                 and fold(r["term"]) == r["term"] and r["outcome"] in MISS_OUTCOMES
                 and r["at"] is not None for r in newest5)
        if ok:
            out["recent_failures"] = {"recall_misses": [
                {"term": headline_of(r["term"]), "outcome": r["outcome"], "at": rfc3339(r["at"])}
                for r in newest5]}

    # 4.8 lane_overrides_total
    lanes = tables["lane_overrides"]
    if lanes and all(r["seq"] > 0 and (r["forced"], r["auto_pick"]) in LANE_PAIRS for r in lanes):
        out["lane_overrides_total"] = len(lanes)

    # 4.9 sources
    cursors = _latest(tables["source_cursors"], lambda r: r["source_key"])
    if cursors:
        tallies: dict[str, dict] = defaultdict(lambda: {"corroborated": 0, "drifted": 0,
                                                        "missing": 0, "mentions": 0})
        for r in _latest(tables["corroborations"],
                         lambda r: (r["capsule_id"], r["kind"], r["ref"])).values():
            t = tallies[r["source"]]
            if r["kind"] == "mention":
                t["mentions"] += 1
            else:
                t[r["verdict"]] += 1
        rows = []
        for key in sorted(cursors, key=lambda k: k.encode()):
            r = cursors[key]
            t = tallies.get(key.split(":")[0], {"corroborated": 0, "drifted": 0, "missing": 0,
                                                "mentions": 0})
            rows.append({"source_key": key, "cursor": r["cursor"], "at": rfc3339(r["at"]),
                         "corroborated": t["corroborated"], "drifted": t["drifted"],
                         "missing": t["missing"], "mentions": t["mentions"]})
        out["sources"] = {"sources": rows}

    # 4.10 dag
    blocks = [r for r in rels if r["kind"] == "blocks"]
    universe = {r["from_id"] for r in blocks} | {r["to_id"] for r in blocks}
    dead = tombstoned | superseded_ids
    done = {r["to_id"] for r in rels if r["kind"] == "witnesses"
            and r["to_id"] in universe and r["to_id"] not in dead}
    blockers: dict[str, set] = defaultdict(set)
    succs: dict[str, set] = defaultdict(set)
    for r in blocks:
        if r["from_id"] not in dead and r["from_id"] not in done:
            blockers[r["to_id"]].add(r["from_id"])
            succs[r["from_id"]].add(r["to_id"])
    active = universe - dead - done
    leftover, cycle = _kahn_cycle(active, blockers, succs)
    dag_lists = None
    if cycle is not None:
        out["dag"] = {"status": "cycle", "cycle": cycle, "entangled_total": len(leftover)}
    else:
        ready = sorted((x for x in active if not blockers.get(x)), key=str.encode)
        blocked = sorted((x for x in active if blockers.get(x)), key=str.encode)
        done_l = sorted(done, key=str.encode)
        dag_lists = {"ready": ready, "blocked": blocked, "done": done_l}
        out["dag"] = {"status": "ok", "ready": ready[:N], "ready_total": len(ready),
                      "blocked": blocked[:N], "blocked_total": len(blocked),
                      "done": done_l[:N], "done_total": len(done_l)}

    # 4.11 mission
    G = [r for r in rels if r["kind"] == "grounded_in"]
    mdead = tombstoned | {x for r in G for x in (r["from_id"], r["to_id"]) if x in superseded_ids}
    grounded_from = {r["from_id"] for r in G if r["to_id"] not in mdead}
    live_G = [r for r in G if r["from_id"] not in mdead and r["to_id"] not in mdead]
    mnodes = {x for r in live_G for x in (r["from_id"], r["to_id"])}
    mpreds: dict[str, set] = defaultdict(set)
    msuccs: dict[str, set] = defaultdict(set)
    for r in live_G:  # forward = child -> parent
        mpreds[r["to_id"]].add(r["from_id"])
        msuccs[r["from_id"]].add(r["to_id"])
    mleft, mcycle = _kahn_cycle(mnodes, mpreds, msuccs)
    if mcycle is not None:
        out["mission"] = {"status": "cycle", "cycle": mcycle, "entangled_total": len(mleft)}
    else:
        roots = []
        for c in reversed(all_):
            if len(roots) == N:
                break
            if kind_of.get(c["id"]) != "epic":
                continue
            if c["id"] in superseded_ids or c["id"] in grounded_from:
                continue
            children = len({(r["from_id"], r["to_id"]) for r in G
                            if r["to_id"] == c["id"] and r["from_id"] not in mdead})
            row = headline(c)
            row["children"] = children
            roots.append(row)
        if roots:
            out["mission"] = {"status": "ok", "roots": roots}

    # 4.12 unanchored
    unanch = sum(1 for c in all_ if c["id"] not in grounded_from
                 and (kind_of.get(c["id"]) == "task" or active_thread_label(c["content"]) is not None)
                 and c["id"] not in superseded_ids)
    if unanch:
        out["unanchored"] = unanch

    # 4.13 tiers
    tiers = {"active": 0, "archived": 0, "quarantined": 0}
    for cid in live_map:
        tiers[tier_of.get(cid, "active")] += 1
    out["tiers"] = tiers

    # 4.14 journal: hash chain + coverage
    prev = ""
    broken = None
    verified = 0
    for j in sorted(tables["journal"], key=lambda r: r["audit_seq"]):
        line = json.dumps({"seq": j["audit_seq"], "at": rfc3339(j["at"]), "actor": j["actor"],
                           "action": j["action"], "subject": j["subject"], "reason": j["reason"]},
                          ensure_ascii=False, separators=(",", ":"))
        h = hashlib.sha256((prev + line).encode()).hexdigest()
        if h != j["chained_hash"]:
            broken = j["audit_seq"]
            break
        prev = j["chained_hash"]
        verified += 1
    subjects = {j["subject"] for j in tables["journal"]}
    forget_subjects = {j["subject"] for j in tables["journal"] if j["action"] in FORGET_ACTIONS}
    oob = sum(1 for cid in live_map if cid not in subjects) + \
        sum(1 for cid in tombstoned if cid in by_id and cid not in forget_subjects)
    out["journal"] = ({"chain": "ok", "verified": verified, "out_of_band": oob} if broken is None
                      else {"chain": "broken", "broken_seq": broken, "out_of_band": oob})

    # 4.15 archive_candidates
    from memframe.taint import scan
    ac = 0
    for cid, c in live_map.items():
        guard = (bool(c["instruction_taint"]) and c["authority_class"] == "externally-imported"
                 and len(scan(c["content"])) > 0)
        if guard:
            continue
        if tier_of.get(cid, "active") != "active":
            continue
        if cid not in superseded_ids or cid in pinned_set:
            continue
        expired = c["valid_to"] is not None and _ns(c["valid_to"]) < now
        us = now - _ns(c["created_at"])
        day_us = 86_400 * 10**9
        age_days = us // day_us if us >= 0 else -((-us) // day_us)  # whole_days truncates to 0
        old = age_days > ARCHIVE_AFTER_DAYS and usage.get(cid, [0])[0] == 0
        if expired or old:
            ac += 1
    out["archive_candidates"] = ac

    # 4.17 staged
    proposed = staged
    if proposed:
        cutoff = rfc3339(now - STALE_PROPOSAL_DAYS * 86_400 * 10**9)
        stale = sum(1 for cid in proposed if rfc3339(latest_review[cid]["at"]) < cutoff)
        out["staged"] = {"proposed": len(proposed), "stale_proposals": stale}

    # 4.17 pinned
    pins = [c for c in reversed(all_) if c["id"] in pinned_set]
    if pins:
        out["pinned"] = [headline(c) for c in pins[:DIGEST_PINNED_CAP]]
        out["pinned_total"] = len(pins)

    # 4.17 open_efforts (0.3.0 admission)
    part_of = [r for r in rels if r["kind"] == "part_of"]
    members: dict[str, set] = defaultdict(set)
    for r in part_of:
        members[r["to_id"]].add(r["from_id"])
    witnessed = {r["to_id"] for r in rels if r["kind"] == "witnesses"}
    in_all = {c["id"] for c in all_}
    efforts = []
    for eid, e in live_map.items():
        if kind_of.get(eid) != "epic" or eid in witnessed or eid in superseded_ids:
            continue
        mem = members.get(eid, set())
        if not (eid in in_all or any(m in in_all for m in mem)):
            continue
        row = headline(e)
        row["member_total"] = len(mem)
        newest = max(mem | {eid}, key=_capnum)
        row["newest_id"] = newest
        if dag_lists is not None:
            scope = mem | {eid}
            for k in ("ready", "blocked", "done"):
                lst = [x for x in dag_lists[k] if x in scope]
                row[k] = lst[:N]
                row[k + "_total"] = len(lst)
        cands = [m for m in mem if m not in superseded_ids and m in live_map
                 and live_map[m]["source"] == HANDOFF_SOURCE]
        if cands:
            h = max(cands, key=lambda m: live_map[m]["seq"])
            row["handoff"] = headline(live_map[h])  # its shape is not spelled out: a headline row
        efforts.append((_capnum(newest), e["seq"], row))
    efforts.sort(key=lambda t: (t[0], t[1]), reverse=True)
    if efforts[:N]:  # 4.0: the list is omitted when empty (after the cap), like handoff
        out["open_efforts"] = [t[2] for t in efforts[:N]]
    if efforts:
        out["open_efforts_total"] = len(efforts)
    return out


def oracle_state(tables: dict) -> dict[str, tuple]:
    """Per capsule id, its state as DESIGN.md section 3 names it (``store.capsule_state()``):
    ``(status, superseded, recall_count, last_recalled_at, kind, tier)``, from the same
    vocabulary as the digest (2.1, 2.2, 4.5): tombstoned when a forget names it, else
    superseded when a supersedes edge points at it, else live; usage summed; the latest
    kind and tier (tier ``active`` when none); instants as integer ns."""
    tombstoned = {f["capsule_id"] for f in tables["forgets"]}
    superseded = {r["to_id"] for r in tables["relations"] if r["kind"] == "supersedes"}
    kind = {cid: r["kind"] for cid, r in
            _latest(tables["classifications"], lambda r: r["capsule_id"]).items()}
    tier = {cid: r["tier"] for cid, r in _latest(tables["tiers"], lambda r: r["capsule_id"]).items()}
    usage: dict[str, list] = {}
    for r in tables["recalls"]:
        u = usage.setdefault(r["capsule_id"], [0, None])
        u[0] += r["count"]
        u[1] = _ns(r["at"]) if u[1] is None or _ns(r["at"]) > u[1] else u[1]
    out = {}
    for c in tables["capsules"]:
        cid = c["id"]
        status = ("tombstoned" if cid in tombstoned else
                  "superseded" if cid in superseded else "live")
        count, last = usage.get(cid, (0, None))
        out[cid] = (status, cid in superseded, count, last, kind.get(cid),
                    tier.get(cid, "active"))
    return out


# wire key order (4.0)
ORDER = ["label", "framing", "total", "by_project", "handoff", "handoff_total", "newest",
         "newest_total", "most_recalled", "most_recalled_total", "relations", "open_sessions",
         "open_session_ids", "audit_events", "recall_misses", "recent_failures",
         "lane_overrides_total", "sources", "dag", "mission", "unanchored", "tiers", "journal",
         "archive_candidates", "staged", "pinned", "pinned_total", "open_efforts",
         "open_efforts_total"]


def wire(body: dict) -> str:
    """The wire text of a body (1.2: compact JSON, keys in the order of 4.0)."""
    return json.dumps({k: body[k] for k in ORDER if k in body}, ensure_ascii=False,
                      separators=(",", ":"))
