"""Offline audits of a memory store (recall misses first).

Examples:
    >>> import os, tempfile
    >>> import memframe as mf
    >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
    >>> mf.audit.recall_misses(store).totals["misses"]
    0
"""

from memframe.audit.coverage import RecallCoverage, recall_coverage
from memframe.audit.misses import (
    AliasRules,
    MissAudit,
    alias_proposals,
    id_like,
    recall_misses,
    vocabulary,
)
from memframe.audit.score import AliasScore, RecallScore, score_aliases, score_recall
from memframe.audit.trust import TrustAudit, trust

__all__ = ["recall_misses", "MissAudit", "recall_coverage", "RecallCoverage",
           "trust", "TrustAudit", "AliasRules", "alias_proposals", "vocabulary",
           "id_like", "score_aliases", "AliasScore", "score_recall", "RecallScore"]
