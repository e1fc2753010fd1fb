"""The store: the only package that touches the file system (object storage included)."""

from memframe.store.store import Partition, RemoteStore, Store, StoreView

__all__ = ["Partition", "RemoteStore", "Store", "StoreView"]
