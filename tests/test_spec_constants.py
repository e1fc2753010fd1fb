"""Spec constants are defined once (memframe.schema) and imported everywhere else: a copy
could drift from the reference's text."""

from __future__ import annotations

import ast
from pathlib import Path

import memframe
from memframe import schema

PACKAGE = Path(memframe.__file__).parent
SPEC_VALUES = {schema.HANDOFF_SOURCE: "HANDOFF_SOURCE", schema.THREAD_PATTERN: "THREAD_PATTERN"}


def _definitions():
    """(module, name, value) of every module-level constant holding a spec value."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and node.value.value in SPEC_VALUES:
                for target in node.targets:
                    yield path.relative_to(PACKAGE).as_posix(), target.id, node.value.value


def test_each_spec_constant_is_defined_once_in_the_schema():
    found = sorted(_definitions())
    assert found == sorted(("schema.py", SPEC_VALUES[v], v) for v in SPEC_VALUES), found


def test_every_user_reads_the_one_definition():
    import memframe.state
    from memframe.digest import scope
    from memframe.digest.state import digest_capsules
    from memframe.store import capture

    # the capsule-state fold (memframe.state) is where the digest state reads the handoff
    assert scope.HANDOFF_SOURCE is memframe.state.HANDOFF_SOURCE \
        is capture.SESSION_FINISH_SOURCE is schema.HANDOFF_SOURCE
    assert scope.THREAD_PATTERN is digest_capsules.THREAD_PATTERN is schema.THREAD_PATTERN


def test_the_reference_and_the_incremental_digest_read_one_set_of_archive_and_audit_rules():
    import memframe.state
    from memframe.digest import ledger
    from memframe.digest.state import digest_aggregates

    assert ledger.STALE_AFTER_NS is digest_aggregates.STALE_AFTER_NS is schema.STALE_AFTER_NS
    # the journal coverage flags are folded by memframe.state for both digests
    assert ledger.FORGET_ACTIONS is memframe.state.FORGET_ACTIONS is schema.FORGET_ACTIONS
    assert schema.STALE_AFTER_NS == (schema.ARCHIVE_AFTER_DAYS + 1) * 86_400 * 10**9
