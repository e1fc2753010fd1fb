"""The state machine of `tests.digest.machine` at a modest count (the long run is
``benchmarks/bench_state_machine.py``)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from tests.digest.machine import DigestMachine

#: examples per run (raise it to search harder: MEMFRAME_MACHINE_EXAMPLES=2000)
EXAMPLES = int(os.environ.get("MEMFRAME_MACHINE_EXAMPLES", "10"))

TestDigestMachine = DigestMachine.TestCase
TestDigestMachine.settings = settings(
    max_examples=EXAMPLES, stateful_step_count=25, deadline=None,
    suppress_health_check=list(HealthCheck))
