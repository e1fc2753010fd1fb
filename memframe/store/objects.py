"""Object storage: one client for stores at ``s3://``, ``gs://``, ``az://`` and ``file://``
URLs, counted in requests and bytes.

The client is obstore, the Python binding of the ``object_store`` crate that Polars and
Delta Lake's Rust core also use. It was chosen over ``pyarrow.fs`` and fsspec because it is
the one of the three that exposes the conditional put a push needs (``mode="create"``,
S3's ``If-None-Match: *``: a generation file is created only if no one created it first),
speaks S3, GCS and Azure through one API, reads the standard environment variables
(``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
``AWS_ALLOW_HTTP``, and their ``GOOGLE_*`` / ``AZURE_*`` peers) and releases the GIL, so
transfers run in parallel threads.

Examples:
    >>> import tempfile
    >>> remote = Objects("file://" + tempfile.mkdtemp())
    >>> remote.put("_log/a.json", b"{}", create=True), remote.put("_log/a.json", b"[]", create=True)
    (True, False)
    >>> remote.get("_log/a.json"), remote.get("_log/b.json")
    (b'{}', None)
    >>> [key for key, _ in remote.listing("_log/")], remote.requests
    (['_log/a.json'], 5)
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from memframe.errors import InvalidInputError, StorageError

#: the URL schemes a store may live at (``file://`` is a local directory)
SCHEMES = ("s3", "s3a", "gs", "gcs", "az", "azure", "abfs", "abfss", "file")
#: transfers in flight at once (per call that moves many objects)
PARALLEL = 16
#: storage options that configure the HTTP client rather than the object store
_CLIENT_KEYS = frozenset({"allow_http", "allow_invalid_certificates", "timeout",
                          "connect_timeout", "proxy_url", "user_agent", "http1_only",
                          "http2_only", "pool_idle_timeout", "pool_max_idle_per_host"})


def is_url(path: object) -> bool:
    """Whether ``path`` names a store by URL (``s3://...``) rather than a local path.

    Examples:
        >>> is_url("s3://bucket/agents/a1"), is_url("/tmp/store"), is_url("C:/x")
        (True, False, False)
    """
    if not isinstance(path, str) or "://" not in path:
        return False
    return path.split("://", 1)[0].lower() in SCHEMES


def local_path(url: str) -> Path | None:
    """The directory a ``file://`` URL names (None for other schemes).

    Examples:
        >>> local_path("file:///tmp/a%20b"), local_path("s3://b/k")
        (PosixPath('/tmp/a b'), None)
    """
    parts = urlsplit(url)
    if parts.scheme.lower() != "file":
        return None
    if parts.netloc not in ("", "localhost"):
        raise InvalidInputError(f"{url}: a file:// URL names a path on this machine "
                                f"(file:///abs/path); got host {parts.netloc!r}")
    return Path(unquote(parts.path))


def _options(storage_options: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """``storage_options`` split into the store's configuration and the HTTP client's
    options (keys are case-insensitive; ``aws_allow_http`` is ``allow_http``)."""
    if storage_options is None:
        return {}, {}
    if not isinstance(storage_options, Mapping):
        raise InvalidInputError(f"storage_options is a dict of option names to values; got "
                                f"{type(storage_options).__name__}")
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for key, value in storage_options.items():
        if not isinstance(key, str):
            raise InvalidInputError(f"storage_options keys are option names; got {key!r:.40}")
        name = {"region_name": "region"}.get(key.lower(), key.lower())  # boto's spelling
        bare = name.split("_", 1)[1] if name.startswith(("aws_", "google_", "azure_")) else name
        if bare in _CLIENT_KEYS:
            client[bare] = value
        else:
            config[name] = value
    return config, client


def _open_store(url: str, storage_options: Mapping[str, Any] | None) -> Any:
    from obstore.store import GCSStore, LocalStore, S3Store, from_url

    config, client = _options(storage_options)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        if scheme == "file":
            path = local_path(url)
            assert path is not None
            path.mkdir(parents=True, exist_ok=True)
            return LocalStore(path)
        prefix = parts.path.strip("/") or None
        if scheme in ("s3", "s3a"):
            return S3Store(parts.netloc, prefix=prefix, config=config or None,
                           client_options=client or None)
        if scheme in ("gs", "gcs"):
            return GCSStore(parts.netloc, prefix=prefix, config=config or None,
                            client_options=client or None)
        return from_url(url, config=config or None, client_options=client or None)
    except InvalidInputError:
        raise
    except Exception as exc:  # obstore's configuration errors (an unknown key, a bad value)
        raise InvalidInputError(f"cannot use {url}: {type(exc).__name__}: {exc}; check the "
                                f"URL and storage_options") from None


class Objects:
    """The objects under one URL prefix, with the requests and bytes spent on them.

    Keys are ``/``-separated paths relative to the prefix (``_log/...json``,
    ``capsules/part-....parquet``). ``get`` answers None for an absent key;
    ``put(create=True)`` answers False when the key already exists (the conditional put).
    Other failures raise `StorageError` naming the URL and the key.
    """

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None):
        if not is_url(url):
            raise InvalidInputError(f"{url!r:.100} is not a store URL; use one of "
                                    f"{', '.join(s + '://' for s in SCHEMES)}")
        self.url = url.rstrip("/")
        self._store = _open_store(self.url, storage_options)
        self._count = threading.Lock()
        self.requests = 0
        self.bytes_read = 0
        self.bytes_written = 0

    def _spent(self, requests: int, read: int = 0, written: int = 0) -> None:
        with self._count:
            self.requests += requests
            self.bytes_read += read
            self.bytes_written += written

    def counts(self) -> dict[str, int]:
        """Requests made and bytes moved so far (``requests``, ``bytes_read``,
        ``bytes_written``)."""
        with self._count:
            return {"requests": self.requests, "bytes_read": self.bytes_read,
                    "bytes_written": self.bytes_written}

    def _fail(self, key: str, what: str, exc: BaseException) -> StorageError:
        return StorageError(f"{what} {self.url}/{key} failed: {type(exc).__name__}: "
                            f"{' '.join(str(exc).split())[:300]}; check the endpoint, the "
                            f"credentials and the network, then run the command again")

    # -- reads --------------------------------------------------------------------------
    def get(self, key: str) -> bytes | None:
        """The object's bytes, or None when it does not exist."""
        import obstore

        try:
            data = bytes(obstore.get(self._store, key).bytes())
        except FileNotFoundError:
            self._spent(1)
            return None
        except Exception as exc:
            raise self._fail(key, "reading", exc) from None
        self._spent(1, read=len(data))
        return data

    def download(self, key: str, dest: Path) -> bool:
        """Copy the object to ``dest`` (written beside it, then renamed into place, so a
        reader of ``dest`` never sees half of it); False when the object does not exist."""
        data = self.get(key)
        if data is None:
            return False
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.parent / f".tmp-{secrets.token_hex(8)}"
        try:
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, dest)
        finally:
            if tmp.exists():
                tmp.unlink()
        return True

    def download_many(self, pairs: Sequence[tuple[str, Path]]) -> list[str]:
        """`download` each ``(key, dest)`` in parallel; the keys that do not exist."""
        if not pairs:
            return []
        with ThreadPoolExecutor(min(PARALLEL, len(pairs))) as pool:
            found = list(pool.map(lambda kd: self.download(*kd), pairs))
        return [key for (key, _), ok in zip(pairs, found, strict=True) if not ok]

    def listing(self, prefix: str = "") -> list[tuple[str, int]]:
        """Every ``(key, size)`` under ``prefix``, sorted by key."""
        import obstore

        found: list[tuple[str, int]] = []
        pages = 0
        try:
            for page in obstore.list(self._store, prefix or None, chunk_size=1000):
                pages += 1
                found.extend((meta["path"], int(meta["size"])) for meta in page)
        except FileNotFoundError:
            pass  # a local prefix that does not exist yet lists nothing
        except Exception as exc:
            raise self._fail(prefix, "listing", exc) from None
        self._spent(max(pages, 1))
        return sorted(found)

    def list_level(self, prefix: str = "") -> tuple[list[str], list[str]]:
        """The "directories" (common prefixes) and the object names directly under
        ``prefix`` (one request per page)."""
        import obstore

        try:
            found = obstore.list_with_delimiter(self._store, prefix or None)
        except FileNotFoundError:
            return [], []
        except Exception as exc:
            raise self._fail(prefix, "listing", exc) from None
        self._spent(1)
        dirs = sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"])
        names = sorted(str(o["path"]).rsplit("/", 1)[-1] for o in found["objects"])
        return dirs, names

    # -- writes -------------------------------------------------------------------------
    def put(self, key: str, data: bytes, *, create: bool = False) -> bool:
        """Write the object; with ``create``, only if it does not exist yet (False when it
        does: someone else created it first)."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            obstore.put(self._store, key, data, mode="create" if create else "overwrite",
                        use_multipart=False)
        except (AlreadyExistsError, PreconditionError, FileExistsError):
            self._spent(1)
            return False
        except Exception as exc:
            raise self._fail(key, "writing", exc) from None
        self._spent(1, written=len(data))
        return True

    def upload_many(self, pairs: Sequence[tuple[Path, str]]) -> None:
        """Upload each local file ``(path, key)`` in parallel (keys that exist already are
        left as they are: partition names are unique, so an existing one is the same file)."""
        if not pairs:
            return
        with ThreadPoolExecutor(min(PARALLEL, len(pairs))) as pool:
            list(pool.map(lambda pk: self.put(pk[1], pk[0].read_bytes(), create=True), pairs))

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete ``keys`` (absent ones are ignored); how many were asked for."""
        import obstore

        keys = list(keys)
        for start in range(0, len(keys), 1000):
            batch = keys[start:start + 1000]
            try:
                obstore.delete(self._store, batch)
                self._spent(1)
            except FileNotFoundError:  # one of them was gone: delete the others one by one
                for key in batch:
                    try:
                        obstore.delete(self._store, key)
                    except FileNotFoundError:
                        pass
                    self._spent(1)
            except Exception as exc:
                raise self._fail(batch[0], "deleting", exc) from None
        return len(keys)


#: how deep `list_stores` looks under a prefix for stores
STORE_DEPTH = 6


def list_stores(url: str, storage_options: Mapping[str, Any] | None = None, *,
                marker: str = "memframe.json") -> list[str]:
    """The URLs of the stores under ``url`` (itself included when it is one), sorted: each
    "directory" that holds ``memframe.json``. A store's own directories are not searched,
    and the walk stops ``STORE_DEPTH`` levels down; its cost is one listing per directory
    visited, whatever the stores hold.

    Examples:
        >>> import memframe as mf, tempfile
        >>> root = tempfile.mkdtemp()
        >>> for name in ("a1", "team/a2"):
        ...     _ = mf.Store.create(f"{root}/{name}")
        >>> [u[len(root) + 7:] for u in list_stores("file://" + root)]
        ['/a1', '/team/a2']
    """
    remote = Objects(url, storage_options)
    found: list[str] = []

    def walk(prefix: str, depth: int) -> None:
        dirs, names = remote.list_level(prefix)
        if marker in names:
            found.append(f"{remote.url}/{prefix}".rstrip("/"))
            return
        if depth < STORE_DEPTH:
            for name in dirs:
                walk(f"{prefix}{name}/", depth + 1)

    walk("", 0)
    return sorted(found)
