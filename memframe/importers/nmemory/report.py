"""The import report: per-table counts as text and HTML."""

from __future__ import annotations

import dataclasses
from typing import Any

# ---- the report --------------------------------------------------------------------------

@dataclasses.dataclass
class ImportReport:
    """What one import read and wrote.

    Attributes:
        source: the SQLite file read.
        store: the memframe store written.
        mode: ``"full"`` (first import), ``"incremental"`` (appended what changed) or
            ``"unchanged"`` (nothing changed since the last import; nothing committed).
        generation: the store generation after the import.
        source_rows: rows in each imported source table at import time.
        read: rows this import actually read from each source table (a re-import reads
            only the append-only tables' new rows).
        added: rows appended to each memframe table by this import.
        erased: capsules whose content this import erased (newly tombstoned).
        skipped: source tables the digest does not read (not imported), with row counts
            (None where the table could not be counted).
        notes: things worth knowing about this source (rows left out, timestamps
            normalised to UTC ``Z`` text, ...).
        seconds: wall time of the import.
    """

    source: str
    store: str
    mode: str
    generation: int
    source_rows: dict[str, int]
    read: dict[str, int]
    added: dict[str, int]
    erased: int
    skipped: dict[str, int | None]
    notes: list[str]
    seconds: float

    @property
    def rows_written(self) -> int:
        """Rows appended to the store (every table)."""
        return sum(self.added.values())

    @property
    def rows_per_second(self) -> float:
        """Source rows read per second of wall time."""
        return sum(self.read.values()) / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (JSON-serialisable)."""
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        # source table names, paths and notes come from the source file: made visible
        from memframe._render.terminal import visible

        lines = [
            visible(f"nMEMORY import ({self.mode}) {self.source} -> {self.store}"),
            f"generation {self.generation}; {self.rows_written:,} rows written in "
            f"{self.seconds:.2f}s" + (f"; {self.erased} capsule content(s) erased"
                                       if self.erased else ""),
            "source table          rows       read   |  memframe table        added",
        ]
        left = [(visible(k), f"{v:>10,} {self.read.get(k, 0):>10,}")
                for k, v in self.source_rows.items()]
        right = list(self.added.items())
        for i in range(max(len(left), len(right))):
            ls = f"{left[i][0]:<16}{left[i][1]}" if i < len(left) else " " * 37
            rs = f"{right[i][0]:<16}{right[i][1]:>10,}" if i < len(right) else ""
            lines.append(f"  {ls}   |  {rs}".rstrip())
        if self.skipped:
            lines.append("not imported (the digest does not read them):")
            for name, rows in self.skipped.items():
                lines.append(f"  {visible(name):<24}{'?' if rows is None else format(rows, ','):>10}")
        for note in self.notes:
            lines.append(f"note: {visible(note)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"ImportReport(mode={self.mode!r}, generation={self.generation}, "
                f"rows_written={self.rows_written}, source={self.source!r}, "
                f"store={self.store!r})")

    def _repr_html_(self) -> str:
        from memframe._render import import_html  # the leaf renderer

        tables: list[tuple[str, list[tuple[str, int | None]]]] = [
            ("source rows", list(self.source_rows.items())),
            ("rows read", list(self.read.items())),
            ("memframe rows added", list(self.added.items()))]
        if self.skipped:
            tables.append(("not imported", list(self.skipped.items())))
        return import_html(title="nMEMORY import", source=str(self.source),
                           store=str(self.store), mode=self.mode, generation=self.generation,
                           rows_written=self.rows_written, seconds=self.seconds,
                           erased=self.erased, tables=tables, notes=list(self.notes))


