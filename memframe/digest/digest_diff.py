"""`digest_diff`: what changed between two digests, as two frames.

Every list of the wire JSON whose items are ids (capsule or session ids, or rows with an
``id``: ``handoff``, ``newest``, ``most_recalled``, ``pinned``, ``open_efforts``,
``open_session_ids``, the dag's ``ready``/``blocked``/``done``, ``mission.roots``, and the
dag lists inside an effort row) gives `DigestDiff.lists` rows: the ids that entered, left
or moved, with their 1-based ranks. Every other scalar that changed (totals, counts by
project, chain verdicts, a listed row's own fields such as ``recall_count``) gives a
`DigestDiff.values` row, its path naming where it sits: ``by_project[team].count``,
``most_recalled[cap-3].recall_count``, ``open_efforts[cap-4].ready_total``. A section the
wire omits (empty lists and zero totals are omitted, reference 4.0) reads as absent: null.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from typing import Any

import polars as pl

from memframe.digest.result import Digest
from memframe.digest.scope import fence_expr
from memframe.errors import InvalidInputError

__all__ = ["DigestDiff", "digest_diff", "previous_session_start"]

LISTS_SCHEMA = pl.Schema({"section": pl.String(), "id": pl.String(), "change": pl.String(),
                          "rank_before": pl.Int64(), "rank_after": pl.Int64()})
VALUES_SCHEMA = pl.Schema({"path": pl.String(), "before": pl.String(), "after": pl.String()})
#: the field a list of rows without an ``id`` is keyed by, when its rows carry it
ROW_KEYS = ("project_id", "source_key")
_MISSING = object()


def _is_id_list(items: list) -> bool:
    return all(isinstance(v, str) or (isinstance(v, dict) and isinstance(v.get("id"), str))
               for v in items)


def _ids(items: list) -> list[str]:
    return [v if isinstance(v, str) else v["id"] for v in items]


def _text(value: Any) -> str | None:
    return None if value is _MISSING else json.dumps(value, ensure_ascii=False,
                                                     separators=(",", ":"))


def _keyed(items: list, keys: tuple[str, ...] = ROW_KEYS) -> dict[str, Any] | None:
    """Rows keyed by their first ``keys`` field every row has distinct, that field left
    out of each row (the path names it)."""
    for key in keys:
        if items and all(isinstance(v, dict) and isinstance(v.get(key), str) for v in items):
            found = [v[key] for v in items]
            if len(set(found)) == len(found):
                return {k: {f: x for f, x in v.items() if f != key}
                        for k, v in zip(found, items, strict=True)}
    return None


def _walk(path: str, before: Any, after: Any
          ) -> Iterator[tuple[str, tuple[str, ...] | tuple[str, Any, Any]]]:
    """("list", (section, id, change, rank_before, rank_after)) and ("value", (path,
    before, after)) rows, in wire order."""
    kinds = {type(v) for v in (before, after) if v is not _MISSING}
    if not kinds:
        return
    if len(kinds) > 1 and kinds & {dict, list}:  # a section changed shape: whole values
        yield "value", (path, _text(before), _text(after))
        return
    if dict in kinds:
        b = before if isinstance(before, dict) else {}
        a = after if isinstance(after, dict) else {}
        for key in [*b, *(k for k in a if k not in b)]:
            yield from _walk(f"{path}.{key}" if path else key, b.get(key, _MISSING),
                             a.get(key, _MISSING))
        return
    if list in kinds:
        b_list: list = before if isinstance(before, list) else []
        a_list: list = after if isinstance(after, list) else []
        if _is_id_list(b_list) and _is_id_list(a_list):
            yield from _list_rows(path, _ids(b_list), _ids(a_list))
            rows_b, rows_a = _keyed(b_list, ("id",)) or {}, _keyed(a_list, ("id",)) or {}
            for key in (k for k in rows_a if k in rows_b):  # a listed row's own fields
                yield from _walk(f"{path}[{key}]", rows_b[key], rows_a[key])
            return
        kb, ka = _keyed(b_list), _keyed(a_list)
        if kb is not None and ka is not None:
            for key in [*kb, *(k for k in ka if k not in kb)]:
                yield from _walk(f"{path}[{key}]", kb.get(key, _MISSING), ka.get(key, _MISSING))
            return
        for i in range(max(len(b_list), len(a_list))):
            yield from _walk(f"{path}[{i}]", b_list[i] if i < len(b_list) else _MISSING,
                             a_list[i] if i < len(a_list) else _MISSING)
        return
    if before is _MISSING or after is _MISSING or before != after or len(kinds) > 1:
        yield "value", (path, _text(before), _text(after))


def _list_rows(section: str, before: list[str], after: list[str]) -> Iterator[tuple[str, Any]]:
    rank_b = {cid: i + 1 for i, cid in enumerate(before)}
    rank_a = {cid: i + 1 for i, cid in enumerate(after)}
    for cid in after:
        if cid not in rank_b:
            yield "list", (section, cid, "entered", None, rank_a[cid])
        elif rank_b[cid] != rank_a[cid]:
            yield "list", (section, cid, "moved", rank_b[cid], rank_a[cid])
    for cid in before:
        if cid not in rank_a:
            yield "list", (section, cid, "left", rank_b[cid], None)


class DigestDiff:
    """What changed between two digests (`digest_diff`).

    Attributes:
        lists: one row per id that entered, left or moved in a list section:
            ``section``, ``id``, ``change`` (``"entered"``, ``"left"``, ``"moved"``),
            ``rank_before``, ``rank_after`` (1-based; null on the side it is absent).
        values: one row per other scalar that changed: ``path``, ``before``, ``after``
            (JSON text; null where the wire omits it).
        before, after: the two digests' generations (None for hand-made tables).
        caveats: sentences naming the parameters the two digests were taken with that
            differ (``headlines``, ``project_prefix``): list entries that left or entered
            may be the cap's or the fence's doing, not the store's. Shown by `to_text`
            and `to_html`.
    """

    def __init__(self, lists: pl.DataFrame, values: pl.DataFrame,
                 before: int | None, after: int | None,
                 caveats: tuple[str, ...] = ()) -> None:
        self.lists, self.values = lists, values
        self.before, self.after = before, after
        self.caveats = caveats

    @property
    def unchanged(self) -> bool:
        """Nothing changed: both frames are empty."""
        return self.lists.height == 0 and self.values.height == 0

    def to_dict(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after,
                "lists": self.lists.to_dicts(), "values": self.values.to_dicts()}

    def to_json(self) -> str:
        """Compact JSON of `to_dict` (the same digests give the same bytes)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    def to_text(self, width: int = 80) -> str:
        """What changed, in lines a person reads on a terminal: each cut to ``width``
        columns, stored text made safe (control characters shown, never sent)."""
        from memframe._render.terminal import terminal_text

        # the notes are wrapped, not cut: each is a sentence to read whole
        head = "\n".join([f"digest diff: generation {self.before} -> {self.after}",
                          *(textwrap.fill(f"note: {c}", width, subsequent_indent="  ")
                            for c in self.caveats)])
        if self.unchanged:
            return terminal_text(f"{head}\nnothing changed", width) + "\n"
        lines = [head]
        for (section,), rows in self.lists.group_by("section", maintain_order=True):
            lines.append(f"{section}:")
            for cid, change, rb, ra in rows.select("id", "change", "rank_before",
                                                   "rank_after").iter_rows():
                where = {"entered": f"at {ra}", "left": f"was {rb}",
                         "moved": f"{rb} -> {ra}"}[change]
                lines.append(f"  {change:<7} {cid} ({where})")
        if self.values.height:
            lines.append("values:")
            for path, b, a in self.values.iter_rows():
                lines.append(f"  {path}: {b or '(absent)'} -> {a or '(absent)'}")
        return terminal_text("\n".join(lines), width) + "\n"

    def _html_body(self) -> str:
        from memframe._render.html import esc, html_table

        title = f"Digest diff: generation {self.before} to {self.after}"
        notes = "".join(f'<p class="mf-sub">{esc(c)}</p>' for c in self.caveats)
        if self.unchanged:
            return f"<h2>{esc(title)}</h2>{notes}<p>Nothing changed.</p>"
        return (f"<h2>{esc(title)}</h2>{notes}"
                + html_table(self.lists, caption="Listed ids that entered, left or moved")
                + html_table(self.values, caption="Values that changed"))

    def to_html(self) -> str:
        """A self-contained page (stored text escaped)."""
        from memframe._render.html import page

        return page("memframe digest diff", self._html_body())

    def _repr_html_(self) -> str:
        from memframe._render.html import fragment

        return fragment(self._html_body())

    def __repr__(self) -> str:
        return (f"DigestDiff(generation {self.before} -> {self.after}: "
                f"{self.lists.height} list changes, {self.values.height} value changes)")


def digest_diff(before: Digest, after: Digest) -> DigestDiff:
    """What changed from the digest ``before`` to the digest ``after``.

    Raises:
        InvalidInputError: either is not a `Digest`, or is an ``unchanged`` stub (a digest
            answered for a ``known_hash`` carries no body: take it without one).

    Examples:
        >>> a = Digest({"total": 2, "newest": [{"id": "cap-2"}, {"id": "cap-1"}]})
        >>> b = Digest({"total": 3, "newest": [{"id": "cap-3"}, {"id": "cap-2"}]})
        >>> d = digest_diff(a, b)
        >>> d.lists.rows()
        [('newest', 'cap-3', 'entered', None, 1), ('newest', 'cap-2', 'moved', 1, 2), ('newest', 'cap-1', 'left', 2, None)]
        >>> d.values.rows()
        [('total', '2', '3')]
        >>> digest_diff(Digest({"total": 1}, headlines=10), Digest({"total": 1}, headlines=3)).caveats
        ('headlines differs (10, then 3): lists may differ by the cap alone',)
    """
    for name, value in (("before", before), ("after", after)):
        if not isinstance(value, Digest):
            raise InvalidInputError(f"digest_diff compares two Digests; {name} is "
                                    f"{type(value).__name__}: pass mf.digest(store)")
        if value.unchanged:
            raise InvalidInputError(
                f"{name} is an unchanged stub (taken with known_hash): it carries no body "
                f"to compare; take the digest without known_hash")
    lists: list[tuple] = []
    values: list[tuple] = []
    for kind, row in _walk("", before.to_dict(), after.to_dict()):
        (lists if kind == "list" else values).append(row)
    return DigestDiff(pl.DataFrame(lists, schema=LISTS_SCHEMA, orient="row"),
                      pl.DataFrame(values, schema=VALUES_SCHEMA, orient="row"),
                      before.generation, after.generation, _caveats(before, after))


def _caveats(before: Digest, after: Digest) -> tuple[str, ...]:
    """What differs in how the two digests were asked for (a cap, a fence), in words."""
    out = []
    for name, what in (("headlines", "lists may differ by the cap alone"),
                       ("project_prefix", "fenced sections may differ by the fence alone")):
        b, a = getattr(before, name), getattr(after, name)
        if b != a:
            out.append(f"{name} differs ({json.dumps(b)}, then {json.dumps(a)}): {what}")
    return tuple(out)


def previous_session_start(view: Any, project_prefix: str | None = None
                           ) -> tuple[int, str] | None:
    """``(generation, session_id)`` of the scope's previous session start, or None.

    The previous session start is the newest ``start`` bracket whose project is in the
    scope (``project_prefix`` or under it; any project without one), passing over a start
    committed with the view's newest canonical rows: a hook that records its session start
    and then reads the digest compares with the session before. The generation is the one
    that committed that bracket: what a digest taken at that session start read.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> first = store.session_start("team")
        >>> _ = store.ingest({"content": "x", "source": "s", "anchor": "a",
        ...                   "project_id": "team"})
        >>> previous_session_start(store, "team")[1] == first
        True
        >>> store.session_start("team") != first  # just recorded: passed over
        True
        >>> previous_session_start(store, "team")[1] == first
        True
        >>> previous_session_start(store, "ops") is None
        True
    """
    view = view.pinned()  # one generation for every read below
    starts = view.table("brackets").filter(pl.col("event") == "start")
    if project_prefix is not None:
        starts = starts.filter(fence_expr(project_prefix))
    newest = starts.select("seq", "session_id").sort("seq", descending=True).head(2).collect()
    if not newest.height:
        return None
    tip = view.generation_of(int(view.snapshot.counter("seq")))
    for seq, session_id in newest.iter_rows():
        generation = view.generation_of(int(seq))
        if generation != tip:
            return generation, session_id
    return None
