"""The trust cross-audit: recalled facts whose footing is weak, and facts past their time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import polars as pl

from memframe.state import current_sidecar

__all__ = ["TrustAudit", "trust"]


@dataclass
class TrustAudit:
    """Attributes:
        recalled: live capsules recalled at least once whose latest git-witness verdict
            (per kind and ref) is ``drifted`` or ``missing``, or whose evidence is
            ``unverified`` or ``inferred``: ``id``, ``project_id``, ``recall_count``,
            ``drifted``, ``missing`` (verdict counts), ``evidence_state``, ``proof_hint``,
            ``reasons`` (list); most recalled first.
        expired: live capsules whose ``event_to`` has passed at the generation's instant,
            and those carrying a ``stale_if`` condition (advisory text, never evaluated:
            listed for a person to check): ``id``, ``project_id``, ``recall_count``,
            ``event_to``, ``stale_if``, ``reason``.
        generation: the store generation audited.
    """

    recalled: pl.DataFrame
    expired: pl.DataFrame
    generation: int

    @property
    def frames(self) -> dict[str, pl.DataFrame]:
        return {"recalled": self.recalled, "expired": self.expired}

    @property
    def totals(self) -> dict[str, int]:
        """Headline counts: recalled capsules on a weak footing, and past their time."""
        return {"recalled": self.recalled.height,
                "recalls": int(self.recalled["recall_count"].sum()),
                "expired": self.expired.height}

    def to_dict(self) -> dict[str, Any]:
        from memframe.frames import json_records

        return {"audit": "trust", "generation": self.generation, "totals": self.totals,
                **{name: json_records(frame) for name, frame in self.frames.items()}}

    def to_json(self) -> str:
        """Deterministic JSON text (same generation -> same bytes)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    def to_text(self, limit: int = 20) -> str:
        """A plain-text report for a terminal (stored text with control characters made
        visible)."""
        from memframe._render.terminal import visible

        t = self.totals
        lines = [f"trust audit, generation {self.generation}: {t['recalled']} recalled "
                 f"capsules on drifted, missing or weak evidence ({t['recalls']} recalls), "
                 f"{t['expired']} past their event time or with a stale_if to check"]
        for name, frame in self.frames.items():
            lines.append("")
            lines.append(f"{name} ({frame.height} rows)")
            for row in frame.head(limit).iter_rows(named=True):
                lines.append("  " + visible(", ".join(f"{k}={v}" for k, v in row.items())))
        return "\n".join(lines)

    def to_html(self, limit: int = 50, *, as_page: bool = True) -> str:
        """One self-contained HTML page (every stored value escaped)."""
        from memframe._render.html import cards, fragment, html_table, page

        body = [f"<h1>trust audit, generation {self.generation}</h1>",
                cards(list(self.totals.items()))]
        captions = {"recalled": "recalled capsules on a weak footing, most recalled first",
                    "expired": "past their event time, or with a stale_if to check"}
        for name, frame in self.frames.items():
            body.append(f"<h2>{captions[name]} ({frame.height:,})</h2>")
            body.append(html_table(frame, limit=limit))
        html = "".join(body)
        return page("memframe trust audit", html) if as_page else fragment(html)

    def _repr_html_(self) -> str:
        return self.to_html(20, as_page=False)

    def __repr__(self) -> str:
        return (f"<TrustAudit generation={self.generation} recalled={self.recalled.height} "
                f"expired={self.expired.height}>")


def trust(store: Any) -> TrustAudit:
    """Cross recall counts with corroboration verdicts, evidence states and event times.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"),
        ...                         clock=lambda: dt.datetime(2026, 7, 23, tzinfo=dt.UTC))
        >>> a, b = store.ingest([
        ...     {"content": "guess", "source": "s", "anchor": "a", "evidence_state": "inferred"},
        ...     {"content": "was so", "source": "s", "anchor": "b",
        ...      "event_from": "2026-01-01T00:00:00Z", "event_to": "2026-02-01T00:00:00Z"}])
        >>> store.record_recall([a, a, b])
        >>> audit = trust(store)
        >>> audit.recalled.select("id", "recall_count", "reasons").rows()
        [('cap-1', 2, ['evidence inferred'])]
        >>> audit.expired.select("id", "reason").rows()
        [('cap-2', 'event_to passed')]
    """
    view = store.pinned()
    now = pl.lit(view.now()).cast(pl.Datetime("ns", "UTC"))
    state = view.capsule_state().filter(pl.col("status") == "live").select(
        "id", "project_id", pl.col("recall_count").fill_null(0))
    verdicts = (view.table("corroborations").sort("seq")
                .group_by("capsule_id", "kind", "ref").agg(pl.col("verdict").last())
                .group_by("capsule_id").agg(
                    (pl.col("verdict") == "drifted").sum().cast(pl.Int64).alias("drifted"),
                    (pl.col("verdict") == "missing").sum().cast(pl.Int64).alias("missing"))
                .rename({"capsule_id": "id"}))
    facts = current_sidecar("epistemics", view.table("epistemics")).rename({"capsule_id": "id"})
    times = current_sidecar("event_times", view.table("event_times")).rename({"capsule_id": "id"})
    reasons = pl.concat_list(
        pl.when(pl.col("drifted") > 0).then(pl.lit("corroboration drifted")),
        pl.when(pl.col("missing") > 0).then(pl.lit("corroboration missing")),
        pl.when(pl.col("evidence_state").is_in(["unverified", "inferred"]))
        .then(pl.lit("evidence ") + pl.col("evidence_state")),
    ).list.drop_nulls().alias("reasons")
    recalled, expired = pl.collect_all([
        state.filter(pl.col("recall_count") > 0)
        .join(verdicts, on="id", how="left").join(facts, on="id", how="left")
        .with_columns(pl.col("drifted", "missing").fill_null(0))
        .with_columns(reasons).filter(pl.col("reasons").list.len() > 0)
        .select("id", "project_id", "recall_count", "drifted", "missing", "evidence_state",
                "proof_hint", "reasons")
        .sort(["recall_count", pl.col("id").str.slice(4).cast(pl.Int64)],
              descending=[True, False]),
        state.join(times, on="id", how="left").join(facts, on="id", how="left")
        .with_columns(pl.when(pl.col("event_to") < now).then(pl.lit("event_to passed"))
                      .when(pl.col("stale_if").is_not_null())
                      .then(pl.lit("stale_if to check")).alias("reason"))
        .filter(pl.col("reason").is_not_null())
        .select("id", "project_id", "recall_count", "event_to", "stale_if", "reason")
        .sort(["recall_count", pl.col("id").str.slice(4).cast(pl.Int64)],
              descending=[True, False]),
    ])
    return TrustAudit(recalled=recalled, expired=expired, generation=view.generation)
