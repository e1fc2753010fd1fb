"""An S3-compatible server on loopback, started by the suite: moto's server mode, speaking
real HTTP (conditional puts included). Each test gets its own bucket and mirror cache."""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

_BUCKETS = itertools.count()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint():
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=2).read()
            break
        except urllib.error.HTTPError:
            break  # it answered
        except OSError as exc:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the S3 test server (python -m moto.server) did not "
                                   "start") from exc
            time.sleep(0.2)
    yield endpoint
    proc.terminate()
    proc.wait(10)


@pytest.fixture
def s3_options(s3_endpoint) -> dict:
    return {"endpoint": s3_endpoint, "access_key_id": "testing",
            "secret_access_key": "testing", "region": "us-east-1", "allow_http": True}


@pytest.fixture
def bucket(s3_endpoint) -> str:
    name = f"b{os.getpid()}-{next(_BUCKETS)}"
    urllib.request.urlopen(urllib.request.Request(f"{s3_endpoint}/{name}", method="PUT")).read()
    return name


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMFRAME_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION",
                 "AWS_ALLOW_HTTP", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
