from __future__ import annotations

import pytest

import memframe as mf
from tests.conftest import TickingClock


@pytest.fixture
def mstore(tmp_path) -> mf.Store:
    return mf.Store.create(tmp_path / "store", clock=TickingClock())
