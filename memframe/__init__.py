"""memframe: an AI agent's long-term memory store as Polars dataframes.

The public API, re-exported; see DESIGN.md section 3. What is not reachable from here (or
from the modules named here) is internal: a leading underscore, or the store's machinery
under ``memframe.store`` other than ``Store``/``StoreView``/``RemoteStore`` (the README's "Public and
internal" rule).
"""

from __future__ import annotations

from typing import Any

from memframe import errors
from memframe._install import warn_if_shadowed
from memframe.budget import memory_limit
from memframe.digest import (
    Digest,
    DigestDiff,
    digest_diff,
    digest_many,
    digest_tables,
    explain,
    per_project_digests,
)
from memframe.digest.core import digest
from memframe.errors import MemframeError
from memframe.fleet import Fleet, fleet
from memframe.store import RemoteStore, Store, StoreView

# `memframe.digest` is the function above: importing the package `memframe.digest` bound
# the name to the package first, and the import of the function binds it again. The
# package's modules stay importable by their full names (`from memframe.digest import
# batch`, `import memframe.digest.core`): the import system finds them in sys.modules.
# `memframe.fleet` is the function in the same way; its module is `sys.modules["memframe.fleet"]`.

warn_if_shadowed()  # the unrelated `memframe` on PyPI installs the same import name

__version__ = "0.1.0"

__all__ = [
    "Store",
    "StoreView",
    "RemoteStore",
    "MemframeError",
    "errors",
    "digest",
    "Digest",
    "digest_diff",
    "DigestDiff",
    "explain",
    "digest_many",
    "digest_tables",
    "per_project_digests",
    "fleet",
    "Fleet",
    "memory_limit",
    "MEMORY_PROJECTION_NAMES",
    "audit",
    "importers",
    "distributed",
    "delta",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # Heavier layers load on first use, so `import memframe` stays fast for the CLI.
    if name == "MEMORY_PROJECTION_NAMES":
        from memframe.jobs import MEMORY_PROJECTION_NAMES

        return MEMORY_PROJECTION_NAMES
    if name in ("audit", "importers", "synth", "graph", "state", "distributed", "display",
                "delta"):
        import importlib

        return importlib.import_module(f"memframe.{name}")
    raise AttributeError(f"module 'memframe' has no attribute {name!r}")
