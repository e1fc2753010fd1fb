"""The store: the only package that touches the file system."""

from memframe.store.store import Store, StoreView

__all__ = ["Store", "StoreView"]
