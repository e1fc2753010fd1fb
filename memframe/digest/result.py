"""The ``Digest`` object: the wire body plus its hash, frames and HTML view."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import polars as pl

from memframe.digest.capsules import HEADLINE_KEYS
from memframe.schema import empty_of

__all__ = ["Digest", "wire_json"]

_HEADLINE_SCHEMA: dict[str, pl.DataType] = {
    "id": pl.String(),
    "project_id": pl.String(),
    "instruction_taint": pl.Boolean(),
    "created_at": pl.String(),
    "headline": pl.String(),
    "tier": pl.String(),
    "expired": pl.Boolean(),
    "kind": pl.String(),
    "superseded": pl.Boolean(),
    "pinned": pl.Boolean(),
}
assert tuple(_HEADLINE_SCHEMA) == HEADLINE_KEYS
_EFFORT_SCHEMA: dict[str, pl.DataType] = {
    "member_total": pl.Int64(),
    "newest_id": pl.String(),
    "ready_total": pl.Int64(),
    "blocked_total": pl.Int64(),
    "done_total": pl.Int64(),
    "handoff_id": pl.String(),
}


def wire_json(body: Any) -> str:
    """The compact wire text: ``json.dumps(body, ensure_ascii=False, separators=(",", ":"))``.

    Examples:
        >>> wire_json({"label": "ADVISORY_NOT_AUTHORITY", "total": 0, "h": "é"})
        '{"label":"ADVISORY_NOT_AUTHORITY","total":0,"h":"é"}'
    """
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


# Instants travel as RFC3339 text on the wire; the frames hold them as datetimes.
_INSTANT_COLUMNS = ("created_at", "last_recalled_at", "at")


def _instants(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        pl.col(c).str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="ns", time_zone="UTC")
        for c in _INSTANT_COLUMNS if frame.schema.get(c) == pl.String
    )


def _headline_frame(rows: list[dict], extra: dict[str, pl.DataType] | None = None) -> pl.DataFrame:
    schema = dict(_HEADLINE_SCHEMA)
    schema.update(extra or {})
    return pl.DataFrame(
        [{key: row.get(key) for key in schema} for row in rows], schema=schema, orient="row"
    ) if rows else empty_of(schema)


class Digest:
    """A session-start digest of one store generation (spec 001).

    Attributes:
        hash: sha256 hex of the full wire text (also when ``unchanged``).
        unchanged: True when the caller's ``known_hash`` equals ``hash``. Such a digest
            carries no bodies: ``to_dict()`` is ``{"unchanged": True, "hash": hash}``,
            ``to_json()`` its compact text and ``frames`` is empty.
        rows_visited: Parquet rows read to answer (sum of the partition row counts of
            every table the call read).
        requests, bytes_fetched: for a store on object storage, the requests the call made
            and the bytes it fetched (0 and 0 when the generation was already in the local
            mirror, but for the probe of a newer one); None for a local store.
        generation: the store generation the digest was taken at (None for hand-made
            tables).
        project_prefix: the fence, or None.
        headlines: the list cap N.

    Examples:
        >>> d = Digest({"label": "ADVISORY_NOT_AUTHORITY", "total": 0})
        >>> d.to_json()
        '{"label":"ADVISORY_NOT_AUTHORITY","total":0}'
        >>> Digest(d.to_dict(), known_hash=d.hash).to_dict() == {"unchanged": True, "hash": d.hash}
        True
    """

    def __init__(
        self,
        body: dict,
        *,
        known_hash: str | None = None,
        rows_visited: int = 0,
        generation: int | None = None,
        project_prefix: str | None = None,
        headlines: int = 10,
        io: dict[str, int] | None = None,
    ):
        self._json = wire_json(body)
        self.hash = hashlib.sha256(self._json.encode("utf-8")).hexdigest()
        self.unchanged = known_hash is not None and known_hash == self.hash
        self._body = body
        self.rows_visited = int(rows_visited)
        self.generation = generation
        self.project_prefix = project_prefix
        self.headlines = headlines
        self.requests = None if io is None else io["requests"]
        self.bytes_fetched = None if io is None else io["bytes_read"]

    @property
    def total(self) -> int:
        """The capsule count the digest covers (its ``total``; within the fence when
        ``project_prefix`` is set). Read from the computed body, so it answers also when
        ``unchanged`` (whose wire stub carries no body).

        Examples:
            >>> Digest({"label": "ADVISORY_NOT_AUTHORITY", "total": 3}).total
            3
        """
        return int(self._body.get("total", 0))

    def __getattr__(self, name: str) -> Any:
        """Every top-level section of the wire body as an attribute (``d.newest``,
        ``d.by_project``, ``d.dag``, ``d.journal``): a fresh copy of its value, read from
        the computed body (also when ``unchanged``).

        Examples:
            >>> d = Digest({"label": "ADVISORY_NOT_AUTHORITY", "total": 0, "newest": []})
            >>> d.newest, d.label
            ([], 'ADVISORY_NOT_AUTHORITY')
            >>> d.newset
            Traceback (most recent call last):
            ...
            AttributeError: a Digest has no section 'newset'; its sections: label, total, newest (did you mean 'newest'?)
        """
        if name.startswith("_"):
            raise AttributeError(name)
        body = self.__dict__.get("_body")
        if body is None:
            raise AttributeError(name)
        if name in body:
            return json.loads(wire_json(body[name]))
        import difflib

        near = difflib.get_close_matches(name, list(body), n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise AttributeError(f"a Digest has no section {name!r}; its sections: "
                             f"{', '.join(body)}{hint}")

    def to_dict(self) -> dict:
        """The wire body as insertion-ordered dicts (a fresh copy), or the unchanged stub."""
        if self.unchanged:
            return {"unchanged": True, "hash": self.hash}
        return json.loads(self._json)

    def to_json(self) -> str:
        """The compact wire text of :meth:`to_dict` (byte-identical per generation)."""
        if self.unchanged:
            return wire_json(self.to_dict())
        return self._json

    @property
    def frames(self) -> dict[str, pl.DataFrame]:
        """The lists of the digest as Polars frames (empty when ``unchanged``).

        Keys: ``summary`` (one row of the scalar sections), ``by_project``, ``handoff``,
        ``newest``, ``most_recalled``, ``open_sessions``, ``recent_failures``,
        ``sources``, ``dag`` (``list``: ready/blocked/done/cycle, ``id``),
        ``mission`` (roots, or the cycle as ``id`` rows), ``pinned`` and
        ``open_efforts`` (the epic headline, ``member_total``, ``newest_id``, the three
        dag totals and ``handoff_id``; null totals when the dag is in a cycle).
        """
        if self.unchanged:
            return {}
        body = self.to_dict()
        dag = body["dag"]
        dag_rows = (
            [("cycle", i) for i in dag["cycle"]]
            if dag["status"] == "cycle"
            else [(k, i) for k in ("ready", "blocked", "done") for i in dag[k]]
        )
        mission = body.get("mission")
        if mission is not None and mission["status"] == "cycle":
            mission_frame = pl.DataFrame({"id": mission["cycle"]}, schema={"id": pl.String})
        else:
            mission_frame = _headline_frame(
                mission["roots"] if mission else [], {"children": pl.Int64()}
            )
        summary = {
            "total": body["total"],
            "relations": body["relations"],
            "open_sessions": body["open_sessions"],
            "audit_events": body["audit_events"],
            "recall_misses": body["recall_misses"],
            "lane_overrides_total": body.get("lane_overrides_total"),
            "unanchored": body.get("unanchored"),
            "dag_status": dag["status"],
            "mission_status": mission["status"] if mission else None,
            **{f"tier_{k}": v for k, v in body["tiers"].items()},
            "journal_chain": body["journal"]["chain"],
            "journal_out_of_band": body["journal"]["out_of_band"],
            "archive_candidates": body["archive_candidates"],
            "staged_proposed": body.get("staged", {}).get("proposed", 0),
            "staged_stale": body.get("staged", {}).get("stale_proposals", 0),
            "pinned_total": body.get("pinned_total", 0),
            "open_efforts_total": body.get("open_efforts_total", 0),
        }
        efforts = [
            {**row, "handoff_id": row.get("handoff", {}).get("id")}
            for row in body.get("open_efforts", [])
        ]
        return {name: _instants(frame) for name, frame in {
            "summary": pl.DataFrame(
                [summary],
                schema_overrides={"lane_overrides_total": pl.Int64, "unanchored": pl.Int64,
                                  "mission_status": pl.String},
            ),
            "by_project": pl.DataFrame(
                body["by_project"],
                schema={"project_id": pl.String, "count": pl.Int64, "live": pl.Int64},
                orient="row",
            ) if body["by_project"] else pl.DataFrame(
                schema={"project_id": pl.String, "count": pl.Int64, "live": pl.Int64}
            ),
            "handoff": _headline_frame(body.get("handoff", [])),
            "newest": _headline_frame(body["newest"]),
            "most_recalled": _headline_frame(
                body["most_recalled"],
                {"recall_count": pl.Int64(), "last_recalled_at": pl.String()},
            ),
            "open_sessions": pl.DataFrame(
                {"session_id": body["open_session_ids"]}, schema={"session_id": pl.String}
            ),
            "recent_failures": pl.DataFrame(
                body.get("recent_failures", {}).get("recall_misses", []),
                schema={"term": pl.String, "outcome": pl.String, "at": pl.String},
                orient="row",
            ) if "recent_failures" in body else pl.DataFrame(
                schema={"term": pl.String, "outcome": pl.String, "at": pl.String}
            ),
            "sources": pl.DataFrame(
                body["sources"]["sources"],
                schema={"source_key": pl.String, "cursor": pl.String, "at": pl.String,
                        "corroborated": pl.Int64, "drifted": pl.Int64, "missing": pl.Int64,
                        "mentions": pl.Int64},
                orient="row",
            ) if "sources" in body else pl.DataFrame(
                schema={"source_key": pl.String, "cursor": pl.String, "at": pl.String,
                        "corroborated": pl.Int64, "drifted": pl.Int64, "missing": pl.Int64,
                        "mentions": pl.Int64}
            ),
            "dag": pl.DataFrame(dag_rows, schema={"list": pl.String, "id": pl.String},
                                orient="row"),
            "mission": mission_frame,
            "pinned": _headline_frame(body.get("pinned", [])),
            "open_efforts": _headline_frame(efforts, _EFFORT_SCHEMA),
        }.items()}

    def _title(self) -> str:
        return "memframe digest" + (
            f" — project_prefix {self.project_prefix}" if self.project_prefix is not None else ""
        )

    def _repr_html_(self) -> str:
        from memframe._render import digest_html

        return digest_html(self.to_dict(), title=self._title(), generation=self.generation,
                           digest_hash=self.hash)

    def to_html(self) -> str:
        """The digest as one self-contained HTML page (inline stylesheet, no script)."""
        from memframe._render import digest_html

        return digest_html(self.to_dict(), title=self._title(), generation=self.generation,
                           digest_hash=self.hash, as_page=True)

    def to_text(self) -> str:
        """The digest as a readable terminal report (what ``memframe digest`` prints on a
        terminal); stored text has its control characters made visible."""
        from memframe._render import digest_text

        return digest_text(self.to_dict(), generation=self.generation, digest_hash=self.hash)

    def __repr__(self) -> str:
        state = "unchanged" if self.unchanged else f"total={self._body.get('total')}"
        return f"<Digest generation={self.generation} {state} hash={self.hash[:12]}…>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Digest) and other.to_json() == self.to_json()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickled (a Ray task's or a worker process's answer) as its wire text and figures
        only, never the body twice nor frames; rebuilt to an equal digest.

        Examples:
            >>> import pickle
            >>> d = Digest({"label": "ADVISORY_NOT_AUTHORITY", "total": 2}, rows_visited=7)
            >>> back = pickle.loads(pickle.dumps(d))
            >>> back == d, back.rows_visited, back.hash == d.hash
            (True, 7, True)
        """
        io = None if self.requests is None else {"requests": self.requests,
                                                 "bytes_read": self.bytes_fetched}
        return (_from_wire, (self._json, self.hash if self.unchanged else None,
                             self.rows_visited, self.generation, self.project_prefix,
                             self.headlines, io))

    __hash__ = None  # type: ignore[assignment]


def _from_wire(text: str, known_hash: str | None, rows_visited: int, generation: int | None,
               project_prefix: str | None, headlines: int,
               io: dict[str, int] | None = None) -> Digest:
    """A `Digest` from its wire text (the inverse of ``Digest.__reduce__``)."""
    return Digest(json.loads(text), known_hash=known_hash, rows_visited=rows_visited,
                  generation=generation, project_prefix=project_prefix, headlines=headlines,
                  io=io)
