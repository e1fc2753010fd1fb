"""One exception hierarchy. Every message says what was wrong and how to fix it."""

from __future__ import annotations

__all__ = [
    "MemframeError",
    "StoreError",
    "NotAStoreError",
    "StoreExistsError",
    "GenerationNotFoundError",
    "CorruptStoreError",
    "ReadOnlyStoreError",
    "ConcurrentCommitError",
    "StorageError",
    "StorageFullError",
    "StorageNotWritableError",
    "InvalidInputError",
    "SchemaValidationError",
    "UnknownCapsuleError",
    "SessionError",
    "TombstonedContentError",
    "DigestParameterError",
    "DigestFailedError",
    "DigestFailedOnCorruptStoreError",
    "AbstractRefusedError",
    "ProjectionRegistryError",
    "ImportSourceError",
    "ClusterError",
    "SourceRewrittenError",
    "MemoryBudgetError",
]


class MemframeError(Exception):
    """Base of every error memframe raises on purpose."""


class StoreError(MemframeError):
    """Something about the store on disk."""


class NotAStoreError(StoreError):
    """The path is not a memframe store."""


class StoreExistsError(StoreError):
    """`Store.create` was pointed at a path that already holds something."""


class GenerationNotFoundError(StoreError):
    """A generation (or an instant) that the store's log does not have."""


class CorruptStoreError(StoreError):
    """A log or partition file that cannot be read as the format says."""


class DeltaLogsAheadError(CorruptStoreError):
    """The Delta logs mirror a generation the store's own log no longer has (a generation
    file lost from ``_log/``): refused until ``memframe delta sync --rebuild``."""


class DamagedDerivedError(CorruptStoreError):
    """A derived file (a projection, the digest's kept state) cannot be read; the rebuild
    writes it again from the canonical tables, and the cycle does so by itself."""


class ReadOnlyStoreError(StoreError):
    """A write verb was called on a frozen view (`store.at(g)` / `store.as_of(t)`)."""


class ConcurrentCommitError(StoreError):
    """Other writers kept winning the race for the next generation."""


class StorageError(StoreError):
    """The file system refused what memframe needed to write; what was staged is removed.

    Attributes:
        errno: the operating system's error number.
        path: the file or directory the refusal was about (None when not known).
    """

    def __init__(self, message: str, *, errno: int | None = None, path: str | None = None):
        super().__init__(message)
        self.errno = errno
        self.path = path


class StorageFullError(StorageError):
    """The disk (or the user's quota) holding the store ran out of space."""


class StorageNotWritableError(StorageError):
    """The store is on a read-only file system, or this user may not write there.

    Reading such a store works; only writes (verbs, jobs, compact, vacuum) are refused.
    """


class InvalidInputError(MemframeError, ValueError):
    """Bad arguments or rows given to a verb; nothing was written."""


class SchemaValidationError(InvalidInputError):
    """A frame failed its table's schema; names the column and the first bad row."""

    def __init__(self, message: str, *, table: str, column: str | None, row: int | None):
        super().__init__(message)
        self.table = table
        self.column = column
        self.row = row


class UnknownCapsuleError(InvalidInputError):
    """A verb named a capsule id the store does not hold (or no longer shows)."""


class TombstonedContentError(InvalidInputError):
    """An ingest of content a forgotten capsule held: forget is sticky, so it is refused.

    The forgotten capsule keeps its content hash (``source_hash``), so the same text can
    never silently come back as a new memory, nor be answered with the dead id.
    """

    def __init__(self, message: str, *, capsule_id: str, row: int):
        super().__init__(message)
        self.capsule_id = capsule_id
        self.row = row


class SessionError(InvalidInputError):
    """A session verb that does not fit the session's state (unknown, finished, ...)."""


class MemoryBudgetError(MemframeError, MemoryError):
    """A path cannot run within the memory budget (``--memory-limit``,
    ``MEMFRAME_MEMORY_LIMIT``); raised before anything is read, with what it would need."""

    def __init__(self, message: str, *, need: int, limit: int):
        super().__init__(message)
        self.need = need
        self.limit = limit


class DigestParameterError(MemframeError, ValueError):
    """A digest parameter that can match nothing (reference 1.1 teaching errors)."""


class DigestFailedError(MemframeError):
    """The digest failed closed (reference 1.1 / 5): a table it must read is unreadable,
    or holds rows it refuses. The message starts with ``memory_digest failed: `` (that
    text is part of the wire behaviour: hooks and the command line match it)."""


class DigestFailedOnCorruptStoreError(DigestFailedError, CorruptStoreError):
    """The digest failed closed because a file of the store is damaged or missing: the
    message keeps the digest's prefix and names the file and what fixes it."""


class AbstractRefusedError(InvalidInputError):
    """abstract() was asked to absorb a member it cannot (already absorbed, or the rollup)."""


class ProjectionRegistryError(MemframeError):
    """A projection name registered without its fold or its door (or the reverse)."""


class ClusterError(MemframeError):
    """The Ray cluster a distributed call needs could not be started or reached."""


class ImportSourceError(MemframeError):
    """The nMEMORY file cannot be imported as it is; nothing was written."""


class SourceRewrittenError(ImportSourceError):
    """A re-import found the source changed in a way that is not an append."""


class ShadowedPackageWarning(UserWarning):
    """Another installed distribution also provides the top-level package ``memframe``
    (the unrelated ``memframe`` on PyPI does): the two overwrite or hide each other."""


class DeltaLogMissingError(MemframeError):
    """A table was asked for as a Delta Lake table, but its store keeps no Delta log for it
    yet (``memframe delta sync STORE`` starts them)."""
