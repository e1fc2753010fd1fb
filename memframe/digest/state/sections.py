"""The digest's subset sections (``handoff``, ``mission``, ``unanchored``, ``pinned``,
``open_efforts``, ``dag``), kept for the unfenced digest.

The job keeps the values of `memframe.digest.assemble.kept_values` for the list cap `CAP`
(``expired`` flags deferred), one table row per list item. They are current while the
subset has not changed since (``SUBSET_MARK``), the graph's kept values are the ones they
were computed from, and no row above the state's watermark touches a capsule that is, or
was, in the subset; a digest with no fence and a cap up to `CAP` then reads a prefix of
the table (`read_current`, `cap_kept`). Any other digest reads the subset, to the same
bytes. Details: docs/architecture.md ("The digest's state").
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.derived.kept import KeptValues
from memframe.digest.state import digest_subset, family_codec
from memframe.store.derived import TEXT_NAMES

if TYPE_CHECKING:
    from memframe.store import StoreView

__all__ = ["TABLE", "KEPT", "SCHEMA", "CAP", "LISTS", "encode", "decode", "marks_of", "read_current",
           "graph_settled", "cap_kept"]

#: the kept values hold headlines: under the text prefix, so an erasure of a capsule a
#: row names drops them (the next cycle computes them again)
TABLE = "projections/text/digest_sections"
#: the marks of the kept values (`marks_of`), as the job last recorded them
MARK = "projections/digest/sections"
KEPT = KeptValues((TABLE,), MARK)
#: ``k`` orders the rows so that what a digest with cap N reads is a prefix of the table:
#: 0 for the scalars, then every ``pinned`` item (its own cap, always read), then the
#: capped lists' items position-major (``_BASE + position * 16 + list``)
#: ``names``: the capsule numbers a row's text names (`memframe.store.derived.TEXT_NAMES`):
#: an erasure drops the table only when a row names an erased capsule (an item carries
#: its capsule's text beside that capsule's id)
SCHEMA = pl.Schema({"k": pl.Int64(), "text": pl.String(), TEXT_NAMES: pl.String()})
#: the largest list cap answered from the kept values (larger caps read the subset)
CAP = 32
#: rows per row group: a digest reads the groups of a prefix, at most this many rows
#: beyond the items it takes
GROUP_ROWS = 8
_BASE = 1 << 20
_LIST_BITS = 4

#: list -> where it sits in the kept values; ``pinned`` has its own cap (every item read)
LISTS: dict[str, tuple[str, ...]] = {
    "pinned": ("curated", "pinned"),
    "handoff": ("handoff",),
    "mission_roots": ("mission", "roots"),
    "open_efforts": ("curated", "open_efforts"),
    "dag_ready": ("dag", "ready"),
    "dag_blocked": ("dag", "blocked"),
    "dag_done": ("dag", "done"),
}
_UNCAPPED = ("pinned",)


def marks_of(watermarks: Mapping[str, Any]) -> dict[str, Any]:
    """What kept values record, from a generation's watermarks (they are current while
    these are unchanged): the cap, the subset's last change and the graph's kept
    values (which code wrote them is the store's concern: `memframe.store.derived`)."""
    return {"cap": CAP,
            "subset": watermarks.get(digest_subset.SUBSET_MARK),
            "graph": family_codec.version_of(watermarks, "graph")}


def graph_settled(view: StoreView, kept: bool) -> bool:
    """Can the kept values' graph be trusted at ``view``: the graph's kept values are
    current (``kept``: the marks name their version), or there is no graph at
    all (no relation and no forget row, and nothing kept)."""
    return kept or (view.row_count("relations") == 0 and view.row_count("forgets") == 0)


def _get(values: dict, path: tuple[str, ...]) -> Any:
    node: Any = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return node


def encode(values: dict) -> pl.DataFrame:
    """Kept values -> the stored rows: row 0 the values with every list emptied, then one
    row per list item (`decode` gives the values back).

    Examples:
        >>> v = {"handoff": [{"id": "cap-2"}, {"id": "cap-1"}], "handoff_total": 2,
        ...      "mission": None, "unanchored": None, "curated": {}, "relations": 0,
        ...      "dag": {"status": "ok", "ready": [], "ready_total": 0, "blocked": [],
        ...              "blocked_total": 0, "done": [], "done_total": 0}}
        >>> rows = encode(v)
        >>> rows.height, decode(rows) == v
        (3, True)
        >>> rows.get_column("names").to_list()  # the capsules each row names
        ['', '2', '1']
    """
    head = json.loads(json.dumps(values))
    keys, texts = [], []
    present = []
    for name, path in LISTS.items():
        items = _get(values, path)
        if not isinstance(items, list):
            continue
        present.append(name)
        _get(head, path[:-1])[path[-1]] = []
        for position, item in enumerate(items):
            keys.append(1 + position if name in _UNCAPPED
                        else _BASE + (position << _LIST_BITS) + list(LISTS).index(name))
            texts.append(json.dumps(item, ensure_ascii=False))
    keys.insert(0, 0)
    texts.insert(0, json.dumps({"lists": present, "values": head}, ensure_ascii=False))
    named = pl.col("text").str.extract_all(r"cap-[0-9]{1,18}").list.eval(
        pl.element().str.slice(4).cast(pl.Int64)).list.unique().list.sort().cast(
        pl.List(pl.String)).list.join(" ")
    return pl.DataFrame({"k": keys, "text": texts}).select(
        "k", "text", named.alias(TEXT_NAMES)).cast(SCHEMA).sort("k")


def decode(rows: pl.DataFrame) -> dict:
    """Stored rows (row 0 and any items of each list) -> the values, with each list
    holding the items read, in order."""
    if not rows.get_column("k").is_sorted():
        rows = rows.sort("k")
    keys, texts = rows.get_column("k").to_list(), rows.get_column("text").to_list()
    head = json.loads(texts[0])
    values = head["values"]
    items: dict[str, list] = {}
    names = list(LISTS)
    for k, text in zip(keys[1:], texts[1:], strict=True):  # columns: no query per row
        name = _UNCAPPED[0] if k < _BASE else names[(k - _BASE) & ((1 << _LIST_BITS) - 1)]
        items.setdefault(name, []).append(json.loads(text))
    for name in head["lists"]:
        path = LISTS[name]
        _get(values, path[:-1])[path[-1]] = items.get(name, [])
    return values


def _last(n: int) -> int:
    """The last ``k`` a digest with cap ``n`` reads: it reads the prefix up to it."""
    return _BASE + (n << _LIST_BITS) - 1


def read_current(view: StoreView, n: int) -> tuple[dict | None, int]:
    """The kept values with each capped list's first ``n`` items, when their marks are the
    ones at ``view`` (None otherwise), and the Parquet rows read. The caller checks the
    rest of what `marks_of` cannot see (the graph is current, no new row touches the
    subset)."""
    if n > CAP or not KEPT.holds(view, marks_of(view.watermarks)):
        return None, 0
    last = _last(n)
    read, frames = 0, []
    for part in view.partitions(TABLE):
        mins, _maxs, counts = view.row_group_ranges(part, "k")
        groups = [g for g, lo in enumerate(mins) if lo is None or lo <= last]
        if groups:
            read += sum(counts[g] for g in groups)
            frames.append(view.read_row_groups(part, groups, SCHEMA))
    if not frames:
        return None, read
    rows = pl.concat(frames, how="vertical").filter(pl.col("k") <= last)
    if rows.filter(pl.col("k") == 0).height != 1:
        return None, read
    return decode(rows), read


def cap_kept(values: dict, n: int, now) -> dict:
    """The kept values (`kept_values` for a cap of at least ``n``) as the digest computes
    them for the cap ``n`` at the instant ``now`` (a new dict; ``values`` is untouched).

    Every list the cap applies to is ordered by a total order, so its first ``n`` rows
    are the first ``n`` of the longer list; the open efforts' dag slices likewise.
    """
    from memframe.digest.capsules import resolve_expired
    from memframe.digest.efforts import DAG_LISTS

    out = {**values, "handoff": values["handoff"][:n]}
    mission = values["mission"]
    if isinstance(mission, dict) and "roots" in mission:
        roots = mission["roots"][:n]
        out["mission"] = {**mission, "roots": roots} if roots else None
    curated = out["curated"] = dict(values["curated"])
    if "open_efforts" in curated:
        rows = [{**row, **{name: row[name][:n] for name in DAG_LISTS if name in row}}
                for row in curated["open_efforts"][:n]]
        if rows:
            curated["open_efforts"] = rows
        else:
            del curated["open_efforts"]
    dag = values["dag"]
    if dag.get("status") == "ok":
        out["dag"] = {**dag, **{name: dag[name][:n] for name in DAG_LISTS}}
    return resolve_expired(out, now)  # a copy: ``values`` is untouched
