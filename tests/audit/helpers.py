"""Independent oracles for the recall-miss audit (plain Python, no Polars folds)."""

from __future__ import annotations

import datetime as dt
from collections import Counter, defaultdict
from collections.abc import Iterable


def osa(a: str, b: str) -> int:
    """Textbook optimal string alignment distance: Levenshtein plus adjacent transposition
    (no substring edited twice)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def term_oracle(rows: Iterable[tuple[dt.datetime, str, str]]) -> dict[str, dict]:
    """(at, term, outcome) rows -> per-term counts, first/last seen and distinct days."""
    out: dict[str, dict] = {}
    for at, term, outcome in rows:
        t = out.setdefault(term, {"misses": 0, "abstain": 0, "missing_evidence": 0,
                                  "first_seen": at, "last_seen": at, "day_set": set()})
        t["misses"] += 1
        t[outcome] += 1
        t["first_seen"] = min(t["first_seen"], at)
        t["last_seen"] = max(t["last_seen"], at)
        t["day_set"].add(at.astimezone(dt.UTC).date())
    for t in out.values():
        t["days"] = len(t.pop("day_set"))
    return out


def daily_oracle(rows: list[tuple[dt.datetime, str, str]]) -> dict[dt.date, dict]:
    """Per UTC day: misses, by outcome, distinct terms, terms first missed that day; every
    day between the first and the last miss is present."""
    if not rows:
        return {}
    per_day: dict[dt.date, Counter] = defaultdict(Counter)
    terms: dict[dt.date, set] = defaultdict(set)
    first: dict[str, dt.date] = {}
    for at, term, outcome in rows:
        day = at.astimezone(dt.UTC).date()
        per_day[day]["misses"] += 1
        per_day[day][outcome] += 1
        terms[day].add(term)
        first[term] = min(first.get(term, day), day)
    new = Counter(first.values())
    lo, hi = min(per_day), max(per_day)
    out = {}
    day = lo
    while day <= hi:
        c = per_day.get(day, Counter())
        out[day] = {"misses": c["misses"], "abstain": c["abstain"],
                    "missing_evidence": c["missing_evidence"], "terms": len(terms.get(day, ())),
                    "new_terms": new.get(day, 0)}
        day += dt.timedelta(days=1)
    return out
