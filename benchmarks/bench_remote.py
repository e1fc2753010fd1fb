"""A store on object storage against the same store on the local disk, side by side.

Starts an S3-compatible server on loopback (moto's server mode, real HTTP), writes a
synthetic store (``--capsules``, its kept state brought up to date by a cycle), pushes it,
and measures, alternating local and remote ``--repeat`` times in this one process:

* ``push``: the first push (every file) and a push after ``--new`` new capsules;
* ``open``: `Store.open(url)` with an empty mirror (the log replayed, nothing else
  fetched) against `Store.open(path)`, then the first digest on it (it fetches the files
  it reads: the journal, to confirm the verified chain by its bytes, and the kept state)
  against the first digest of a fresh local handle;
* ``warm digest``: `mf.digest` on the remote handle whose mirror holds the generation,
  against the local store;
* ``digest after a push``: the first remote digest after the push of ``--new`` capsules
  (it fetches the new generation's files) against the local digest of that generation.

Each line gives the median wall time of both sides, their ratio, and the requests and
bytes of the remote side. Both sides answer the same bytes (checked).

Usage::

    python benchmarks/bench_remote.py [--capsules 20000] [--new 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
NOW = dt.datetime(2027, 1, 1, tzinfo=dt.UTC)


def s3_server(bucket: str) -> tuple[subprocess.Popen, str]:
    """An S3-compatible server on loopback (moto's server mode) holding an empty
    ``bucket``: the process and its endpoint."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(endpoint, timeout=2).read()
            break
        except OSError:
            time.sleep(0.1)
    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")).read()
    return proc, endpoint


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--capsules", type=int, default=20_000)
    parser.add_argument("--new", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    import memframe as mf

    work = Path(tempfile.mkdtemp(prefix="bench-remote-"))
    os.environ["MEMFRAME_CACHE_DIR"] = str(work / "cache")
    proc, endpoint = s3_server("bench")
    options = {"endpoint": endpoint, "access_key_id": "bench", "secret_access_key": "bench",
               "region": "us-east-1", "allow_http": True}
    try:
        path = work / "store"
        subprocess.run([sys.executable, "-m", "memframe", "synth", "--capsules",
                        str(args.capsules), "--quiet", "--end", "2026-12-01T00:00:00Z",
                        str(path)], check=True)
        local = mf.Store.open(path)
        local.memory.run_cycle()
        url = "s3://bench/agents/a1"
        rows = []

        t, report = _timed(lambda: local.push(url, storage_options=options))
        rows.append(("first push", None, t, report["requests"], report["bytes"]))

        opens_local, opens_remote, requests, fetched = [], [], [], []
        firsts_local, firsts_remote, first_requests, first_fetched = [], [], [], []
        for i in range(args.repeat):
            t, here = _timed(lambda: mf.Store.open(path))
            opens_local.append(t)
            firsts_local.append(_timed(lambda here=here: mf.digest(here, now=NOW))[0])
            t, remote = _timed(lambda i=i: mf.Store.open(url, storage_options=options,
                                                          cache_dir=work / f"mirror{i}"))
            opens_remote.append(t)
            requests.append(remote.io_counts()["requests"])
            fetched.append(remote.io_counts()["bytes_read"])
            t, first = _timed(lambda remote=remote: mf.digest(remote, now=NOW))
            firsts_remote.append(t)
            first_requests.append(first.requests)
            first_fetched.append(first.bytes_fetched)
        rows.append(("open, empty mirror", statistics.median(opens_local),
                     statistics.median(opens_remote), statistics.median(requests),
                     statistics.median(fetched)))
        rows.append(("first digest after it", statistics.median(firsts_local),
                     statistics.median(firsts_remote), statistics.median(first_requests),
                     statistics.median(first_fetched)))

        remote = mf.Store.open(url, storage_options=options)
        mf.digest(remote, now=NOW)  # warm: the mirror holds what the digest reads
        here, there, there_requests = [], [], []
        for _ in range(args.repeat):
            t, a = _timed(lambda: mf.digest(local, now=NOW))
            here.append(t)
            t, b = _timed(lambda: mf.digest(remote, now=NOW))
            there.append(t)
            there_requests.append(b.requests)
            assert a.to_json() == b.to_json()
        rows.append(("warm digest", statistics.median(here), statistics.median(there),
                     statistics.median(there_requests), 0))

        local.ingest([{"content": f"new note {i}", "source": "bench", "anchor": f"n{i}"}
                      for i in range(args.new)])
        local.memory.run_cycle()
        t, report = _timed(lambda: local.push(url, storage_options=options))
        rows.append((f"push of {args.new:,} new", None, t, report["requests"], report["bytes"]))
        t_local, a = _timed(lambda: mf.digest(local, now=NOW))
        t_remote, b = _timed(lambda: mf.digest(remote, now=NOW))
        assert a.to_json() == b.to_json()
        rows.append(("digest after that push", t_local, t_remote, b.requests, b.bytes_fetched))
    finally:
        proc.terminate()

    print(f"store: {args.capsules:,} capsules (synthetic), S3 server on loopback; "
          f"median of {args.repeat}")
    print(f"{'':<24}{'local':>10}{'remote':>10}{'ratio':>8}{'requests':>10}{'bytes':>12}")
    for name, a, b, n, size in rows:
        ratio = f"{b / a:.1f}x" if a else ""
        shown = f"{a * 1000:.0f} ms" if a is not None else "-"
        print(f"{name:<24}{shown:>10}{b * 1000:>7.0f} ms{ratio:>8}{n:>10,}{size:>12,}")


if __name__ == "__main__":
    main()
