"""Other engines' stores -> a memframe store.

Today: nMEMORY's SQLite file (schema v20, release 0.2.x, or v21, release 0.3.0), imported
once or incrementally.
"""

from __future__ import annotations

from memframe.importers.nmemory import (
    ImportReport,
    ImportSourceError,
    SourceRewrittenError,
    import_nmemory,
)

__all__ = ["import_nmemory", "ImportReport", "ImportSourceError", "SourceRewrittenError"]
