"""``memframe.digest`` is a plain function, whatever was imported first; the digest's
package is reached by its full name, and its bulk functions from the top level."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("first", [
    "import memframe as mf, memframe.digest.core",
    "import memframe.digest.core, memframe as mf",
    "from memframe.digest import batch; import memframe as mf",
    "import memframe.digest.state.cold_fold; import memframe as mf",
])
def test_memframe_digest_is_the_function_in_a_fresh_interpreter(first):
    code = (f"{first}\nimport sys, types\n"
            "core = sys.modules['memframe.digest.core']\n"
            "assert isinstance(mf.digest, types.FunctionType), mf.digest\n"
            "assert mf.digest is core.digest\n"
            "assert type(sys.modules['memframe.digest']) is types.ModuleType\n"
            "print('ok')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                     "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr


def test_the_bulk_digests_are_public_at_the_top_level():
    import memframe as mf
    from memframe.digest import batch, core, result

    assert mf.per_project_digests is batch.per_project_digests
    assert mf.digest_many is batch.digest_many
    assert mf.digest_tables is core.digest_tables
    assert mf.Digest is result.Digest
    assert {"digest", "Digest", "digest_many", "digest_tables",
            "per_project_digests"} <= set(mf.__all__)
