"""``explain``: why a capsule is, or is not, in each list of the digest. ``listed`` is read
from the body the digest's own door answers (`core.reference_read`); ``rank`` and ``reason``
from the reference state of that same read, by the section modules' own rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from memframe.digest import params
from memframe.digest.capsules import handoff_candidates, handoff_rows, recalled_order
from memframe.digest.core import reference_read
from memframe.digest.efforts import effort_board
from memframe.digest.params import quoted
from memframe.digest.planning import root_candidates, unanchored_candidates
from memframe.digest.scope import HANDOFF_SOURCE, fence, population
from memframe.digest.source import TableSource
from memframe.digest.staged import PINNED_CAP, latest_reviews, pinned_order
from memframe.errors import InvalidInputError, UnknownCapsuleError

__all__ = ["EXPLAIN_SECTIONS", "EXPLAIN_SCHEMA", "explain", "section_ids"]

#: the sections of the wire JSON that name capsule ids, in wire order (reference 4.0)
EXPLAIN_SECTIONS = ("handoff", "newest", "most_recalled", "dag.ready", "dag.blocked",
                    "dag.done", "dag.cycle", "mission.roots", "mission.cycle", "unanchored",
                    "staged", "pinned", "open_efforts")
EXPLAIN_SCHEMA = pl.Schema({"section": pl.String(), "listed": pl.Boolean(),
                            "rank": pl.Int64(), "reason": pl.String()})


def section_ids(body: dict, section: str) -> list[str]:
    """The capsule ids a section (a dotted path) of a digest body names; [] for a count.

    Examples:
        >>> body = {"newest": [{"id": "cap-2"}], "dag": {"ready": ["cap-1"]}, "staged": {}}
        >>> [section_ids(body, s) for s in ("newest", "dag.ready", "staged")]
        [['cap-2'], ['cap-1'], []]
    """
    value: Any = body
    for key in section.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if not isinstance(value, list):
        return []
    return [v["id"] if isinstance(v, dict) else v for v in value]


def _rank(frame: pl.DataFrame, cid: str) -> int | None:
    found = frame.with_row_index("_at").filter(pl.col("id") == cid).get_column("_at")
    return int(found[0]) + 1 if found.len() else None


_arrow = " -> ".join


def _names(ids: list[str]) -> str:
    return ", ".join(ids[:3]) + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")


@dataclass
class _Facts:
    """What every section's reason reads: the capsule's state row and the reference read."""

    cid: str
    row: dict
    n: int
    prefix: str | None
    source: TableSource
    scoped: pl.DataFrame
    graph: dict

    def edges(self, kind: str, *, to: str | None = None, start: str | None = None
              ) -> list[str]:
        """The other ends of ``kind`` edges into ``to`` (or out of ``start``), by seq."""
        rel = self.source.tables["relations"].filter(pl.col("kind") == kind).sort("seq")
        near, far = ("to_id", "from_id") if to is not None else ("from_id", "to_id")
        found = rel.filter(pl.col(near) == (to if to is not None else start)).get_column(far)
        return found.unique(maintain_order=True).to_list()

    def excluded(self) -> str | None:
        """Why the capsule is outside the fenced population (reference 4.1), or None."""
        if self.row["status"] == "tombstoned":
            return (f"tombstoned (2.1): forgotten ({self.row['forget_mode']}), it leaves "
                    f"every capsule list")
        if self.row["staged"]:
            verdict = latest_reviews(self.source.reviews()).filter(
                pl.col("capsule_id") == self.cid).get_column("verdict")[0]
            return (f"staged and not ratified (4.17): its latest review verdict is "
                    f"{quoted(verdict)}; staged capsules leave every capsule section")
        if _rank(self.scoped, self.cid) is None:
            return (f"outside the prefix {self.prefix}/ (3): its project "
                    f"{quoted(self.row['project_id'])} is neither {quoted(str(self.prefix))} "
                    f"nor under it")
        return None

    def superseded(self, clause: str, tail: str = "") -> str | None:
        by = _names(self.edges("supersedes", to=self.cid))
        return f"superseded by {by}{tail} ({clause})" if self.row["superseded"] else None

    def kind(self) -> str:
        kind = self.row["kind"]
        return f"its kind is {quoted(kind)}" if kind is not None else "it was never classified"

    def anchors(self, clause: str) -> str:
        live = set(self.source.state().filter(pl.col("status") == "live")["id"].to_list())
        parents = [p for p in self.edges("grounded_in", start=self.cid) if p in live]
        return f"anchored by grounded_in to the live parent {_names(parents)} ({clause})"


def _fenced(reason: Any) -> Any:
    """A section of the fenced population (4.1): a capsule outside it is told why."""
    def checked(f: _Facts, listed: bool) -> tuple[int | None, str]:
        why = f.excluded()
        return (None, why) if why else reason(f, listed)
    return checked


def _placed(rank: int | None, listed: bool, n: int, order: str) -> str:
    return f"listed at rank {rank} ({order})" if listed else (
        f"rank {rank} past headlines {n} (raise headlines)")


@_fenced
def _handoff(f: _Facts, listed: bool) -> tuple[int | None, str]:
    rank = _rank(handoff_rows(f.scoped), f.cid)
    if rank is not None:
        return rank, _placed(rank, listed, f.n, "newest first, one per project and thread, 4.3")
    bracket, thread = f.row["source"] == HANDOFF_SOURCE, f.row["thread"]
    if not bracket and thread is None:
        row = f.source.state().filter(pl.col("id") == f.cid)
        text = f.source.attach(row).get_column("content")[0] or ""
        if text.startswith("ACTIVE("):
            return None, ("not a thread handoff: the ACTIVE( label is not closed (2.3: no "
                          "')' follows it)")
        return None, ("not a handoff (2.3): its source is not memory_session_finish and its "
                      "content does not open ACTIVE(label)")
    if f.row["superseded"] and not bracket:
        return None, (f"a thread handoff retired by {_names(f.edges('supersedes', to=f.cid))} "
                      f"(4.3): a superseded thread row leaves the lead")
    same = handoff_candidates(f.scoped).filter(
        (pl.col("project_id") == f.row["project_id"])
        & pl.col("thread").eq_missing(pl.lit(thread, dtype=pl.String)))
    winner = same.sort("seq", descending=True).get_column("id")[0]
    project = quoted(f.row["project_id"])
    slot = (f"project {project}, thread {quoted(thread)}" if thread is not None
            else f"the bracket slot of project {project}")
    return None, f"a newer handoff {winner} holds {slot} (4.3: the newest per key wins)"


@_fenced
def _newest(f: _Facts, listed: bool) -> tuple[int | None, str]:
    rank = _rank(f.scoped.sort("seq", descending=True), f.cid)  # the whole population
    return rank, _placed(rank, listed, f.n, "newest first, 4.4")


@_fenced
def _most_recalled(f: _Facts, listed: bool) -> tuple[int | None, str]:
    rank = _rank(recalled_order(f.scoped), f.cid)
    return (None, "never recalled (4.5): no recall receipt names it") if rank is None else (
        rank, _placed(rank, listed, f.n, "recall_count, then last recall, seq; 4.5"))


def _dag(name: str) -> Any:
    def reason(f: _Facts, listed: bool) -> tuple[int | None, str]:
        projection = f.graph["dag_projection"]
        if projection["status"] != "ok":
            return None, (f"the blocks dag has a live cycle ({_arrow(projection['cycle'])}), so no "
                          f"{name} list is served (4.10): supersede, forget or witness a member")
        if f.cid in projection[name]:
            rank = projection[name].index(f.cid) + 1
            return rank, _placed(rank, listed, f.n, "byte-wise id order, 2.4")
        if not (f.edges("blocks", to=f.cid) or f.edges("blocks", start=f.cid)):
            return None, "not a blocks-edge participant (4.10): no blocks edge names it"
        if f.row["status"] == "tombstoned" or f.row["superseded"]:
            return None, (f.superseded("4.10", ": dead to the dag")
                          or "tombstoned: dead to the dag (4.10)")
        if f.cid in projection["done"]:
            return None, (f"done: witnessed by {_names(f.edges('witnesses', to=f.cid))}, it "
                          f"leaves ready and blocked (4.10)")
        if name == "done":
            return None, "not witnessed (4.10): no witnesses edge names it"
        if name == "ready":
            active = set(projection["ready"]) | set(projection["blocked"])
            blockers = sorted(b for b in f.edges("blocks", to=f.cid) if b in active)
            return None, f"blocked by {_names(blockers)} (4.10)"
        return None, "ready (4.10): no live capsule that is not done blocks it"
    return reason


def _on_cycle(report: dict | None, cid: str, what: str, clause: str) -> tuple[int | None, str]:
    if report is None or report.get("status") != "cycle":
        return None, f"the {what} is acyclic ({clause}): no cycle is reported"
    if cid in report["cycle"]:
        rank = report["cycle"].index(cid) + 1
        return rank, (f"listed at rank {rank} on the reported {what} cycle ({clause}): "
                      f"supersede or forget a member to repair it")
    return None, f"not on the one {what} cycle reported ({clause}: {_arrow(report['cycle'])})"


@_fenced
def _roots(f: _Facts, listed: bool) -> tuple[int | None, str]:
    graph = f.graph["mission_graph"]
    if graph.cycle is not None:
        return None, (f"the mission graph has a live grounded_in cycle "
                      f"({_arrow(graph.cycle['cycle'])}), so no roots are served (4.11)")
    rank = _rank(root_candidates(f.scoped, graph), f.cid)
    if rank is not None:
        return rank, _placed(rank, listed, f.n, "newest first, 4.11")
    if f.row["kind"] != "epic":
        return None, f"not an epic (4.11): {f.kind()}"
    return None, f.superseded("4.11") or f.anchors("4.11")


@_fenced
def _unanchored(f: _Facts, listed: bool) -> tuple[int | None, str]:
    counted = _rank(unanchored_candidates(f.scoped, f.graph["mission_graph"]), f.cid)
    if counted is not None:
        what = "a task" if f.row["kind"] == "task" else "an ACTIVE() thread row"
        return None, (f"counted in unanchored (4.12): {what} with no live grounded_in anchor; "
                      f"the section is a count and names no ids")
    if f.row["kind"] != "task" and f.row["thread"] is None:
        return None, "not a planning node (4.12): neither kind task nor an ACTIVE() thread row"
    return None, f.superseded("4.12") or f.anchors("4.12")


def _staged(f: _Facts, listed: bool) -> tuple[int | None, str]:
    latest = latest_reviews(f.source.reviews()).filter(pl.col("capsule_id") == f.cid)
    if latest.height == 0:
        return None, "not staged (4.17): it was never put up for review"
    verdict = quoted(latest.get_column("verdict")[0])
    if f.row["staged"]:
        return None, (f"counted in staged.proposed (4.17): its latest review verdict is "
                      f"{verdict}, not ratified; the section is a count and names no ids")
    return None, f"not staged (4.17): its latest review verdict is {verdict}"


@_fenced
def _pinned(f: _Facts, listed: bool) -> tuple[int | None, str]:
    rank = _rank(pinned_order(f.scoped), f.cid)
    if rank is None:
        unpinned = f.source.tables["pins"].filter(pl.col("capsule_id") == f.cid).height
        return None, ("not pinned (4.17): its latest pin row unpinned it" if unpinned
                      else "never pinned (4.17)")
    return rank, f"listed at rank {rank} (newest first, 4.17)" if listed else (
        f"rank {rank} past the pinned cap {PINNED_CAP} (4.17: DIGEST_PINNED_CAP; headlines "
        f"does not raise it)")


def _open_efforts(f: _Facts, listed: bool) -> tuple[int | None, str]:
    alive = f.source.state().filter(pl.col("status") != "tombstoned")
    board = effort_board(f.scoped, alive, f.graph["effort_graph"],
                         f.source.member_scopes(f.prefix))
    rank = _rank(board, f.cid)
    if rank is not None:
        return rank, _placed(rank, listed, f.n, "newest member first, 4.17")
    if f.row["status"] == "tombstoned":
        return None, "tombstoned (4.17): an open effort's epic is not forgotten"
    if f.row["kind"] != "epic":
        return None, f"not an epic (4.17): {f.kind()}"
    witnesses = f.edges("witnesses", to=f.cid)
    if f.row["superseded"] or witnesses:
        return None, (f.superseded("4.17", ": not an open epic")
                      or f"witnessed by {_names(witnesses)}: done, not an open epic (4.17)")
    why = (f.excluded() or "").split(";")[0]
    return None, f"{why}, and no part_of member of it is in the population (4.17)"


_REASONS = {"handoff": _handoff, "newest": _newest, "most_recalled": _most_recalled,
            "dag.ready": _dag("ready"), "dag.blocked": _dag("blocked"), "dag.done": _dag("done"),
            "dag.cycle": lambda f, _listed: _on_cycle(f.graph["dag_projection"], f.cid,
                                                      "blocks dag", "4.10"),
            "mission.roots": _roots,
            "mission.cycle": lambda f, _listed: _on_cycle(f.graph["mission_graph"].cycle, f.cid,
                                                          "mission graph", "4.11"),
            "unanchored": _unanchored, "staged": _staged, "pinned": _pinned,
            "open_efforts": _open_efforts}
assert tuple(_REASONS) == EXPLAIN_SECTIONS


def explain(store: Any, capsule_id: str, *, project_prefix: str | None = None,
            headlines: int | None = params.HEADLINES_DEFAULT) -> pl.DataFrame:
    """Why ``capsule_id`` is, or is not, in each list of the digest of these parameters.

    ``store``: a ``Store`` or a frozen view; ``project_prefix``, ``headlines``: the digest's.

    Returns:
        One row per section of `EXPLAIN_SECTIONS`, in wire order: ``section``, ``listed``
        (the id is in that section of the digest), ``rank`` (its 1-based place in the
        section's order before the cap; null: not in the section's population), ``reason``.

    Raises:
        UnknownCapsuleError: the store holds no such capsule.
        InvalidInputError, DigestParameterError: a bad ``headlines`` or ``project_prefix``.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> clock = lambda: dt.datetime(2026, 7, 23, 12, tzinfo=dt.UTC)
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=clock)
        >>> old, new = store.ingest([{"content": f"ACTIVE(t): {word}", "source": "s",
        ...                           "anchor": "a"} for word in ("first", "second")])
        >>> store.relate(new, old, "supersedes")
        >>> why = mf.explain(store, old, headlines=1)
        >>> print(why.filter(pl.col("section") == "handoff")["reason"].item())
        a thread handoff retired by cap-2 (4.3): a superseded thread row leaves the lead
        >>> why.filter(pl.col("section") == "newest").row(0)
        ('newest', False, 2, 'rank 2 past headlines 1 (raise headlines)')
    """
    n = params.list_cap(params.validate_headlines(headlines))
    prefix = params.validate_project_prefix(project_prefix)
    if not isinstance(capsule_id, str):
        raise InvalidInputError(f"capsule_id must be an id like 'cap-12', got {capsule_id!r}")
    source, body = reference_read(store, n, prefix)
    state = source.state()
    found = state.filter(pl.col("id") == capsule_id)
    if found.height == 0:
        held = f"ids run cap-1..cap-{state.height}" if state.height else "it holds no capsule"
        raise UnknownCapsuleError(
            f"capsule {capsule_id!r:.80} is not in this store ({held}); list the ids with "
            f"store.capsule_state() or `memframe digest STORE --format json`")
    facts = _Facts(capsule_id, found.row(0, named=True), n, prefix, source,
                   fence(population(state), prefix), source.graph_values())
    rows = []
    for section in EXPLAIN_SECTIONS:
        listed = capsule_id in section_ids(body, section)
        rows.append((section, listed, *_REASONS[section](facts, listed)))
    return pl.DataFrame(rows, schema=EXPLAIN_SCHEMA, orient="row")
