"""The engines `memframe.digest.batch.digest_many` runs its digests on: local worker processes, or
one Ray task per store, each digesting one store alone and reporting its error text
rather than stopping the batch."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from memframe.digest.core import digest
from memframe.digest.result import Digest
from memframe.errors import ClusterError, InvalidInputError, MemframeError

__all__ = ["import_ray", "ray_running", "check_workers", "on_processes", "on_ray"]


def _digest_one(path: str, kwargs: dict[str, Any]) -> Digest:
    from memframe.store import Store

    store = Store.open(path)
    return digest(store, **kwargs)


def import_ray(*, data: bool = False) -> Any:
    """The ``ray`` module (with ``ray.data`` when asked), or a teaching error (Ray is
    optional: ``pip install "ray[data]>=2.30"``, or ``pip install -e ".[ray]"`` from a checkout)."""
    try:
        import ray

        if data:
            import ray.data  # noqa: F401
    except ImportError as exc:
        raise MemframeError(
            f'the Ray engine needs Ray, which is not installed ({exc}); install it with '
            f'python3 -m pip install "ray[data]>=2.30" (or, from the checkout\'s root, '
            f'python3 -m pip install -e ".[ray]"), or use the local engine'
        ) from None
    return ray


@contextlib.contextmanager
def ray_running(ray: Any, address: str | None, num_cpus: int | None) -> Iterator[bool]:
    """Use the running Ray, else connect to ``address`` or start a local one; stop what
    was started here. Yields True when this call started (or connected) Ray."""
    if ray.is_initialized():
        yield False
        return
    try:
        if address is not None:
            ray.init(address=address)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False)
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; all mean "no cluster"
        where = f"the Ray cluster at {address!r}" if address is not None else "a local Ray"
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise ClusterError(
            f"could not start or reach {where} ({type(exc).__name__}: {first}); nothing was "
            f"digested. Check the address (ray status), or leave --engine ray out to use "
            f"local processes"
        ) from None
    try:
        yield True
    finally:
        ray.shutdown()


def check_workers(value: int | None, name: str = "num_cpus") -> None:
    """A worker count is a positive integer or None (all of this machine's CPUs)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 1):
        raise InvalidInputError(f"{name} must be a positive integer or None, got {value!r}")


def _bar(total: int, progress: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="digest", unit="store", file=sys.stderr,
                disable=not (progress and sys.stderr.isatty()))


def _digest_or_error(path: str, kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """One store's digest, or its error text (run as a Ray task)."""
    try:
        return True, _digest_one(path, kwargs)
    except Exception as exc:  # noqa: BLE001 - reported per store, never fatal
        return False, f"{type(exc).__name__}: {exc}"


def on_processes(paths: list[str], workers: int | None, progress: bool,
                  kwargs: dict[str, Any]) -> Iterator[tuple[str, bool, Any]]:
    # imported here: a single digest (a session-start hook) never loads worker machinery
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    count = max(1, min(workers or os.cpu_count() or 1, len(paths)))
    bar = _bar(len(paths), progress)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
        futures = {pool.submit(_digest_or_error, path, kwargs): path for path in paths}
        for future in as_completed(futures):
            path = futures[future]
            try:
                ok, value = future.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker fails one store only
                ok, value = False, f"{type(exc).__name__}: {exc}"
            yield path, ok, value
            bar.update(1)
    bar.close()


def on_ray(paths: list[str], workers: int | None, address: str | None, progress: bool,
            kwargs: dict[str, Any]) -> Iterator[tuple[str, bool, Any]]:
    ray = import_ray()
    with ray_running(ray, address, workers):
        task = ray.remote(num_cpus=1)(_digest_or_error)
        pending = {task.remote(os.path.abspath(path), kwargs): path
                   for path in dict.fromkeys(paths)}
        bar = _bar(len(pending), progress)
        waiting = list(pending)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            for ref in done:
                try:
                    ok, value = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a lost worker fails one store only
                    ok, value = False, f"{type(exc).__name__}: {exc}"
                yield pending[ref], ok, value
                bar.update(1)
        bar.close()
