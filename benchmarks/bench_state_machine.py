"""The digest's state machine (`tests.digest.machine`) run long: random sessions of every
verb, the warm digest checked against ``verify="full"``, the full algorithm and the digest
after one more cycle after every step.

It prints the examples and steps run, the time per step, and the first failing history
(shrunk) if any. The suite runs the same machine at a modest count
(`tests/digest/test_state_machine.py`).

Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_state_machine.py --examples 2000
    PYTHONPATH=. python benchmarks/bench_state_machine.py --examples 200 --steps 40 --no-shrink
"""

from __future__ import annotations

import argparse
import sys
import time
import unittest

from hypothesis import HealthCheck, Phase, settings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=25, help="steps per example at most")
    parser.add_argument("--no-shrink", action="store_true",
                        help="report the first failing history as found (faster)")
    args = parser.parse_args(argv)

    from tests.digest import machine

    checks = [0]
    spent = [0.0]
    check = machine.check_digest

    def counted(*a: object, **k: object) -> None:
        start = time.perf_counter()
        check(*a, **k)  # type: ignore[arg-type]
        spent[0] += time.perf_counter() - start
        checks[0] += 1
        if checks[0] % 250 == 0:  # a long run says how far it got
            print(f"  {checks[0]:,} checks, {time.perf_counter() - began:,.0f} s", flush=True)

    began = time.perf_counter()
    machine.check_digest = counted  # type: ignore[assignment]
    phases = [Phase.explicit, Phase.generate] + ([] if args.no_shrink else [Phase.shrink])
    case = machine.DigestMachine.TestCase
    case.settings = settings(max_examples=args.examples, stateful_step_count=args.steps,
                             deadline=None, phases=phases, database=None,
                             suppress_health_check=list(HealthCheck))
    start = time.perf_counter()
    result = unittest.TextTestRunner(stream=sys.stderr, verbosity=0).run(case("runTest"))
    took = time.perf_counter() - start
    print(f"examples asked: {args.examples}, steps per example <= {args.steps}")
    print(f"checks run (one after every step): {checks[0]:,}, in {took:,.0f} s "
          f"({spent[0] / max(checks[0], 1) * 1000:.0f} ms per check)")
    print("result:", "passed" if result.wasSuccessful() else "FAILED (history above)")
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
