"""Offline audits of a memory store (recall misses first).

Examples:
    >>> import os, tempfile
    >>> import memframe as mf
    >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
    >>> mf.audit.recall_misses(store).totals["misses"]
    0
"""

from memframe.audit.misses import AliasRules, MissAudit, alias_proposals, recall_misses, vocabulary

__all__ = ["recall_misses", "MissAudit", "AliasRules", "alias_proposals", "vocabulary"]
