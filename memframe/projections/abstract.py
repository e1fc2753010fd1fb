"""Landing prose the engine does not write: ``abstract()`` and the language seam.

The engine never writes prose (spec 000, rule 10), but it lands it atomically:

* `abstract` writes the rollup capsule, a ``processing`` row per absorbed member
  (``abstracted_into_memory_id``) and an ``abstracted_into`` edge per member in ONE
  commit, validated against the generation it lands on top of. A member that is
  missing, tombstoned or already abstracted there is refused; when another writer
  abstracts a member first, the commit re-validates against that newer generation and
  fails cleanly, writing nothing.
* `summarize` hands each session's member rows to a user function and records what it
  returns as canonical ``summaries`` rows; the session fold carries the latest one into
  ``summary``, so a rebuild keeps it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe.errors import AbstractRefusedError, InvalidInputError
from memframe.ids import capsule_number_expr
from memframe.store import capture

if TYPE_CHECKING:
    from memframe.store import Store, StoreView
    from memframe.store.capture import Commit

__all__ = ["AbstractRefusedError", "abstract", "summarize"]


def _absorb(c: Commit, members: list[str], row: Mapping[str, Any]) -> str:
    for mid in members:
        c.require_capsule(mid, live=True, what="member")  # missing or tombstoned: refused
        if c.is_absorbed(mid):
            raise AbstractRefusedError(
                f"member {mid!r} is already abstracted into another rollup at generation "
                f"{c.generation}; a memory is absorbed at most once"
            )
    (rollup,) = c.ingest(dict(row))
    if rollup in members:
        raise AbstractRefusedError(
            f"the rollup's content is already stored as member {rollup!r}; a rollup cannot "
            f"absorb itself: write the abstraction as new text"
        )
    c.absorb(members, rollup)
    c.operations.append("abstract")
    return rollup


def abstract(store: Store, member_ids: Sequence[str], content: str, *, source: str,
             anchor: str, **fields: Any) -> str:
    """Write a rollup capsule absorbing ``member_ids``, in one generation-pinned commit.

    Args:
        store: the store to write.
        member_ids: the capsules the rollup absorbs (distinct, live, not yet absorbed).
        content: the rollup's text (written by the caller, never by the engine).
        source: the rollup's provenance source.
        anchor: the rollup's provenance anchor.
        **fields: any other capsule field (project_id, conversation_id, author, ...).

    Returns:
        The rollup's capsule id.

    Raises:
        UnknownCapsuleError: a member is missing or tombstoned.
        AbstractRefusedError: a member is already absorbed (also when a concurrent
            commit absorbed it first).

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "ab"])
        >>> store.memory.abstract([a, b], "a and b", source="rollup", anchor="ab")
        'cap-3'
        >>> store.table("processing").select("capsule_id", "abstracted_into_memory_id").collect().rows()
        [('cap-1', 'cap-3'), ('cap-2', 'cap-3')]
    """
    members = list(member_ids) if not isinstance(member_ids, str) else [member_ids]
    if not members:
        raise InvalidInputError("abstract needs at least one member id")
    if len(set(members)) != len(members):
        raise InvalidInputError(f"member ids repeat: {members!r}; name each member once")
    unknown = sorted(set(fields) - set(capture.INGEST_COLUMNS))
    if unknown:
        raise InvalidInputError(f"unknown capsule field(s) {', '.join(unknown)}; allowed: "
                                f"{', '.join(capture.INGEST_COLUMNS)}")
    row = {**fields, "content": content, "source": source, "anchor": anchor}
    return store.commit(lambda c: _absorb(c, members, row), operation="memory_abstract")


def summarize(store: Store, view: StoreView, session_ids: Sequence[str] | str,
              summarizer: Callable[[pl.DataFrame], str | None]) -> dict[str, str]:
    """Ask ``summarizer`` about each session and land what it returns, in one commit.

    ``summarizer`` is called once per session with that session's member rows (the
    capsule columns, in ``(created_at, id)`` order, erased contents as null) and returns
    the summary text, or None to record nothing. The results land as canonical
    ``summaries`` rows; the next cycle (or a rebuild) carries the latest one per
    conversation into the session row's ``summary``.

    Args:
        store: the store to write.
        view: the pinned generation the member rows are read from.
        session_ids: the conversation ids to summarise.
        summarizer: the user function (the language seam).

    Returns:
        conversation id -> the summary landed.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest({"content": "hi", "source": "s", "anchor": "a",
        ...                   "conversation_id": "conv-1"})
        >>> store.memory.summarize(["conv-1"], lambda rows: f"{rows.height} memory")
        {'conv-1': '1 memory'}
    """
    ids = [session_ids] if isinstance(session_ids, str) else list(dict.fromkeys(session_ids))
    if not ids:
        return {}
    if not callable(summarizer):
        raise InvalidInputError("summarize needs a callable: summarizer(member_rows) -> str | None")
    members = (view.table("capsules").filter(pl.col("conversation_id").is_in(ids))
               .collect(engine="in-memory"))
    members = members.with_columns(
        capsule_number_expr("id").alias("_n")
    ).sort("created_at", "_n", "id").drop("_n")
    found = set(members["conversation_id"].unique().to_list())
    missing = [i for i in ids if i not in found]
    if missing:
        raise InvalidInputError(
            f"no capsule belongs to conversation(s) {', '.join(map(repr, missing))}; "
            f"summarize sessions that have members"
        )
    results: dict[str, str] = {}
    for cid in ids:
        text = summarizer(members.filter(pl.col("conversation_id") == cid))
        if text is None:
            continue
        if not isinstance(text, str):
            raise InvalidInputError(
                f"the summarizer returned {type(text).__name__} for {cid!r}; return text or None"
            )
        results[cid] = text

    def land(c: Commit) -> None:
        for cid, text in results.items():
            c.record_summary(cid, text)

    if results:
        store.commit(land, operation="memory_summarize")
    return results
