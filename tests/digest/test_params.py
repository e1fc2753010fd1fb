"""Parameter validation before any read (ref 1.1, 8 row 40)."""

from __future__ import annotations

import pytest
from conftest import put

import memframe as mf
from memframe.errors import DigestParameterError, InvalidInputError, MemframeError

EMPTY_TEACH = (
    "project_prefix is empty — it can match no project id; omit the field to search "
    'unfenced, or pass a subtree root like "nott"'
)


class Untouchable:
    """A 'store' that fails on any use: proves validation happens before reading."""

    def __getattr__(self, name):
        raise AssertionError(f"the digest touched the store ({name}) before validating")


@pytest.mark.parametrize("prefix", ["", "  ", "\t\n"])
def test_40_blank_prefix_teaches(prefix):
    with pytest.raises(DigestParameterError) as info:
        mf.digest(Untouchable(), project_prefix=prefix)
    assert str(info.value) == EMPTY_TEACH
    assert isinstance(info.value, MemframeError)


@pytest.mark.parametrize(
    ("prefix", "shown", "fixed"),
    [
        ("nott/", '"nott/"', '"nott"'),
        ("nott//", '"nott//"', '"nott"'),
        ("/", '"/"', '""'),
        ('a"b\n/', '"a\\"b\\n/"', '"a\\"b\\n"'),
    ],
)
def test_40_trailing_separator_teaches(prefix, shown, fixed):
    with pytest.raises(DigestParameterError) as info:
        mf.digest(Untouchable(), project_prefix=prefix)
    assert str(info.value) == (
        f"project_prefix {shown} ends with the subtree separator and can match no project id "
        f"— pass {fixed} (the engine adds \"/\" itself: it matches the prefix exactly or "
        f'prefix + "/...")'
    )


def test_prefix_must_be_a_string():
    with pytest.raises(InvalidInputError):
        mf.digest(Untouchable(), project_prefix=3)


def test_headlines_validated_before_reading():
    with pytest.raises(InvalidInputError, match="non-negative integer"):
        mf.digest(Untouchable(), headlines=-1)


def test_known_hash_must_be_text(store):
    with pytest.raises(InvalidInputError):
        mf.digest(store, known_hash=123)


def test_naive_now_is_refused(store):
    import datetime as dt

    with pytest.raises(InvalidInputError, match="timezone-aware"):
        mf.digest(store, now=dt.datetime(2026, 1, 1))


def test_valid_odd_prefix_is_accepted(store):
    put(store, "x", project=" nott")
    assert mf.digest(store, project_prefix=" nott").to_dict()["total"] == 1


def test_headlines_past_an_unsigned_64_bit_count_are_refused_before_reading():
    with pytest.raises(InvalidInputError, match="unsigned 64-bit count"):
        mf.digest(Untouchable(), headlines=2**64)
    with pytest.raises(InvalidInputError, match="unsigned 64-bit count"):
        mf.explain(Untouchable(), "cap-1", headlines=2**70)


@pytest.mark.parametrize("verify", ["incremental", "full"])
def test_the_largest_headlines_lists_everything(store, verify):
    # any cap at or above the capsule count lists them all, up to the largest the engine takes
    for i in range(5):
        put(store, f"ACTIVE(t{i}): note {i}", project="nott")
    store.memory.run_cycle()
    put(store, "after the cycle", project="nott")
    huge = mf.digest(store, headlines=2**64 - 1, verify=verify)
    assert huge.to_json() == mf.digest(store, headlines=50, verify=verify).to_json()
    assert huge.headlines == 2**64 - 1 and len(huge.to_dict()["newest"]) == 6
    why = mf.explain(store, "cap-1", headlines=2**64 - 1)
    assert why.equals(mf.explain(store, "cap-1", headlines=50))
    assert all(mf.per_project_digests(store, 1, headlines=2**64 - 1)["nott"].to_dict()[k]
               for k in ("newest", "handoff"))


def test_headlines_none_is_the_default_as_an_absent_field_is(store):
    # reference 1.1: headlines is optional; absent (null) means 10
    for i in range(12):
        put(store, f"note {i}")
    default = mf.digest(store)
    assert mf.digest(store, headlines=None).to_json() == default.to_json()
    assert mf.digest(store, headlines=None).headlines == 10 == len(default.to_dict()["newest"])
    assert mf.explain(store, "cap-1", headlines=None).equals(mf.explain(store, "cap-1"))
