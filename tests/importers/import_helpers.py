"""Shared helpers for the nMEMORY importer tests (a plain module: test dirs share no conftest)."""

from __future__ import annotations

import datetime as dt
import hashlib
import sqlite3
from pathlib import Path

import memframe as mf
from tests.conftest import FROZEN, TickingClock

NOW = dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=dt.UTC)
EXPECTED = Path(__file__).parent / "expected"


clock = TickingClock(NOW, FROZEN)  # the suite's clock, frozen at NOW


def digest_text(store_path: Path, **params) -> str:
    """The digest wire text of a store at the fixed instant (``headlines``, ...)."""
    return mf.digest(mf.Store.open(store_path, clock=clock), now=NOW, **params).to_json()


def expected_text(name: str) -> str:
    return (EXPECTED / f"{name}.json").read_text(encoding="utf-8").rstrip("\n")


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def execute(db: Path, *statements: tuple[str, tuple] | str) -> None:
    """Run raw SQL against a fixture file (to corrupt or rewrite it)."""
    con = sqlite3.connect(db)
    for stmt in statements:
        if isinstance(stmt, str):
            con.execute(stmt)
        else:
            con.execute(*stmt)
    con.commit()
    con.close()
