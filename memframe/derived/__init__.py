"""Generic storage for derived tables: sorted runs and keyed runs.

Derived tables live under ``projections/`` in a store and are rebuildable from the
canonical tables alone. This package knows how rows are laid out (sorted runs merged on a
budget, `memframe.derived.runs`; one current row per key, `memframe.derived.keyed`), never
what they mean: the projections (`memframe.projections`) and the digest's state
(`memframe.digest.state`) decide that.
"""
