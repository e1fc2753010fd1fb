"""The engines `memframe.digest.batch.digest_many` runs its digests on: local worker processes, or
one Ray task per store, each digesting one store alone and reporting its error text
rather than stopping the batch.

Ray tasks are submitted as a Ray user expects (`ray_tasks`, which `memframe.fleet` uses
too): at most ``max_in_flight`` tasks are submitted at once (default: twice the cluster's
CPUs per task's CPUs), the rest wait on the driver until one finishes (``ray.wait``); each
task's Polars thread pool is sized to the CPUs the task reserves, through the task's own
``runtime_env`` (``POLARS_MAX_THREADS``), so N tasks on an N-core worker run N Polars
threads, not N squared; and each task hands back a small result (a digest travels as its
wire text, never its frames)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memframe.digest.core import digest
from memframe.digest.result import Digest
from memframe.errors import ClusterError, InvalidInputError, MemframeError

__all__ = ["import_ray", "ray_running", "check_workers", "on_processes", "on_ray",
           "ray_tasks", "task_options", "in_flight_limit", "progress_bar"]


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


def progress_bar(total: int, progress: bool, desc: str = "digest") -> Any:
    """A tqdm bar over ``total`` stores on stderr, silent unless ``progress`` and stderr is
    a terminal."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="store", file=sys.stderr,
                disable=not (progress and sys.stderr.isatty()))


def write_json(out_dir: Path, name: str, text: str) -> Path:
    """``<out_dir>/<name>.json``, written beside it and renamed into place."""
    target = out_dir / f"{name}.json"
    tmp = out_dir / f".{name}.json.tmp-{os.getpid()}"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target


def _digest_or_error(path: str, kwargs: dict[str, Any], out: Path | None = None
                     ) -> tuple[bool, Any]:
    """One store's digest, or its error text (run as a Ray task or in a worker process).
    With ``out``, the digest is written there by the worker, which answers only the
    file, the hash and the generation (so a large batch's driver holds small rows)."""
    try:
        d = _digest_one(path, kwargs)
        if out is None:
            return True, d
        name = path.rstrip("/").rsplit("/", 1)[-1]
        return True, {"written": str(write_json(out, name, d.to_json())), "hash": d.hash,
                      "generation": d.generation}
    except Exception as exc:  # noqa: BLE001 - reported per store, never fatal
        return False, f"{type(exc).__name__}: {exc}"


def on_processes(paths: list[str], workers: int | None, progress: bool,
                  kwargs: dict[str, Any], out: Path | None = None
                  ) -> Iterator[tuple[str, bool, Any]]:
    # imported here: a single digest (a session-start hook) never loads worker machinery
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    count = max(1, min(workers or os.cpu_count() or 1, len(paths)))
    bar = progress_bar(len(paths), progress)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
        futures = {pool.submit(_digest_or_error, path, kwargs, out): path for path in paths}
        for future in as_completed(futures):
            path = futures[future]
            try:
                ok, value = future.result()
            except Exception as exc:  # noqa: BLE001 - a lost worker fails one store only
                ok, value = False, f"{type(exc).__name__}: {exc}"
            yield path, ok, value
            bar.update(1)
    bar.close()


def task_options(num_cpus: int) -> dict[str, Any]:
    """The options of one Ray task that reserves ``num_cpus``: its Polars thread pool is
    sized to them through the task's own ``runtime_env`` (Polars reads
    ``POLARS_MAX_THREADS`` when the worker imports it), never through a process-wide
    setting.

    Examples:
        >>> task_options(2)
        {'num_cpus': 2, 'runtime_env': {'env_vars': {'POLARS_MAX_THREADS': '2'}}}
    """
    return {"num_cpus": num_cpus,
            "runtime_env": {"env_vars": {"POLARS_MAX_THREADS": str(num_cpus)}}}


def in_flight_limit(ray: Any, num_cpus: int, max_in_flight: int | None) -> int:
    """How many tasks may be submitted at once: ``max_in_flight``, else twice the tasks
    the cluster's CPUs hold at once (so a worker that finishes finds the next task
    queued), at least one.

    Examples:
        >>> import types
        >>> fake = types.SimpleNamespace(cluster_resources=lambda: {"CPU": 4.0})
        >>> in_flight_limit(fake, 1, None), in_flight_limit(fake, 2, None), in_flight_limit(fake, 1, 3)
        (8, 4, 3)
    """
    if max_in_flight is not None:
        return max_in_flight
    cpus = int(ray.cluster_resources().get("CPU", 1))
    return max(1, 2 * cpus // num_cpus)


def ray_tasks(ray: Any, fn: Any, calls: list[tuple[Any, ...]], *, max_in_flight: int | None,
              num_cpus: int = 1, bar: Any = None) -> Iterator[tuple[int, bool, Any]]:
    """Run ``fn(*call)`` for every call as Ray tasks, with backpressure.

    ``fn`` reports its own errors as ``(False, text)`` and its result as ``(True, value)``;
    a task that Ray loses (a dead worker) is reported as ``(False, text)`` too. Yields
    ``(index of the call, ok, value)`` in completion order. Ray must be running.
    """
    check_workers(max_in_flight, "max_in_flight")
    task = ray.remote(**task_options(num_cpus))(fn)
    limit = in_flight_limit(ray, num_cpus, max_in_flight)
    waiting = iter(enumerate(calls))
    pending: dict[Any, int] = {}
    while True:
        for index, call in waiting:
            pending[task.remote(*call)] = index
            if len(pending) >= limit:
                break
        if not pending:
            return
        done, _ = ray.wait(list(pending), num_returns=1)
        for ref in done:
            index = pending.pop(ref)
            try:
                ok, value = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a lost worker fails one call only
                ok, value = False, f"{type(exc).__name__}: {exc}"
            if bar is not None:
                bar.update(1)
            yield index, ok, value


def on_ray(paths: list[str], workers: int | None, address: str | None, progress: bool,
           kwargs: dict[str, Any], max_in_flight: int | None = None, out: Path | None = None
           ) -> Iterator[tuple[str, bool, Any]]:
    ray = import_ray()
    unique = list(dict.fromkeys(paths))
    with ray_running(ray, address, workers):
        bar = progress_bar(len(unique), progress)
        calls = [(path if "://" in path else os.path.abspath(path), kwargs,
                  None if out is None else out.absolute()) for path in unique]
        for index, ok, value in ray_tasks(ray, _digest_or_error, calls,
                                          max_in_flight=max_in_flight, bar=bar):
            yield unique[index], ok, value
        bar.close()
