"""The store: the only package that touches the file system."""

from memframe.store.store import Partition, Store, StoreView

__all__ = ["Partition", "Store", "StoreView"]
