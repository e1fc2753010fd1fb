"""Property: importing at any points of a source's history ends equal to one import of the end."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from import_helpers import digest_text
from nmemory_fixture import Builder

from memframe.importers import import_nmemory

OPS = st.lists(
    st.tuples(st.sampled_from(["ingest", "relate", "recall", "forget", "classify", "tier",
                               "session", "miss", "scan", "stage", "review", "pin",
                               "import"]),
              st.integers(min_value=0, max_value=10**6)),
    min_size=4, max_size=24,
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_any_import_points_equal_one_import(tmp_path_factory, ops):
    tmp = tmp_path_factory.mktemp("prop")
    db = tmp / "a.db"
    Builder(db).close()
    tick = iter(range(10_000))
    live: list[str] = []
    open_sessions: list[str] = []

    def at() -> str:
        n = next(tick)
        frac = f"{n * 7 % 999 + 1:03d}".rstrip("0")  # canonical text: no trailing zero
        return f"2026-07-22T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}.{frac}Z"

    for op, r in ops:
        if op == "import":
            import_nmemory(db, tmp / "inc", progress=False)
            continue
        b = Builder(db, fresh=False)
        if op == "ingest" or not live:
            live.append(b.ingest(f"note {len(live)} {r}", at=at(), project=f"p{r % 3}"))
        elif op == "relate" and len(live) > 1:
            a, z = live[r % len(live)], live[(r // 7) % len(live)]
            kind = ("supersedes", "blocks", "grounded_in", "witnesses")[r % 4]
            exists = b.con.execute("SELECT 1 FROM relations WHERE kind = ? AND from_id = ? AND "
                                   "to_id = ?", (kind, a, z)).fetchone()
            if a != z and not exists:
                b.relate(a, z, kind, at=at())
        elif op == "recall":
            b.recall([live[r % len(live)]], at=at())
        elif op == "forget" and len(live) > 1:
            b.forget(live.pop(r % len(live)), ("purged", "redacted")[r % 2], at=at())
        elif op == "classify":
            b.classify(live[r % len(live)], ("task", "epic", "fact")[r % 3], at=at())
        elif op == "tier":
            b.tier(live[r % len(live)], ("archived", "quarantined", "active")[r % 3], at=at())
        elif op == "session":
            if open_sessions and r % 2:
                b.session_finish(open_sessions.pop(), at=at(), project="p0",
                                 handoff=f"handoff {r}")
            else:
                open_sessions.append(b.session_start("p0", at=at()))
        elif op == "miss":
            b.miss([f"term{r % 5}"], "abstain", at=at())
        elif op == "stage":
            b.stage(live[r % len(live)], at=at())
        elif op == "review":
            b.review(live[r % len(live)], ("ratified", "rejected")[r % 2], at=at(), reason="r")
        elif op == "pin":
            b.pin(live[r % len(live)], bool(r % 2), at=at(), reason="why")
        elif op == "scan":
            b.git_scan("git:/r", f"sha{r}", [(live[r % len(live)], "mention", "x", "missing")],
                       at=at())
        b.close()
    import_nmemory(db, tmp / "inc", progress=False)
    import_nmemory(db, tmp / "fresh", progress=False)
    assert digest_text(tmp / "inc") == digest_text(tmp / "fresh")
