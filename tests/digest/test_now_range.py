"""``digest(now=...)`` outside the instants a store can hold is refused up front.

Regression: it failed inside the computation with a dtype conversion message, although the
docstring promises an InvalidInputError.
"""

from __future__ import annotations

import datetime as dt

import pytest

import memframe as mf
from memframe.errors import InvalidInputError


@pytest.mark.parametrize("now", [
    dt.datetime(9999, 12, 31, tzinfo=dt.UTC),
    dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5))),
    dt.datetime(1600, 1, 1, tzinfo=dt.UTC),
    dt.datetime(2262, 4, 12, tzinfo=dt.UTC),
])
def test_a_now_outside_the_range_is_refused_before_anything_is_read(tmp_path, now):
    store = mf.Store.create(tmp_path / "s")
    store.ingest({"content": "a", "source": "s", "anchor": "a"})
    with pytest.raises(InvalidInputError, match="now.*(1677-09-21|expressed in UTC)"):
        mf.digest(store, now=now)
    inside = dt.datetime(2262, 4, 11, tzinfo=dt.UTC)
    assert mf.digest(store, now=inside).to_dict()["total"] == 1
