"""The memory budget (`memframe.budget`): every path that folds a whole store gives the
same bytes under a budget that splits its work into many chunks as without one, and a
budget the smallest chunk cannot fit is refused before anything is read or written."""

from __future__ import annotations

import shutil
import subprocess
import sys

import polars as pl
import pytest

import memframe as mf
from memframe import budget
from memframe.digest.state import cold_fold
from memframe.errors import InvalidInputError, MemoryBudgetError
from memframe.store import ranges
from memframe.synth import synthesize

#: a budget with room for ~40 capsules per range once each capsule is priced at 1 MiB
SMALL = "344MiB"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A synthetic store of 400 capsules (every table the fold reads), no derived state."""
    path = tmp_path_factory.mktemp("budget") / "s"
    synthesize(path, capsules=400, chunk_rows=100, dag_cycle=True)
    return path


@pytest.fixture
def store(built, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(built, copy)
    return mf.Store.open(copy)


@pytest.fixture
def dear(monkeypatch):
    """Each capsule of a range priced at 1 MiB: a small budget then folds ranges of a few
    dozen capsules, through the very code that sizes them."""
    monkeypatch.setattr(budget, "RANGE_BYTES", 2**20)
    calls = []
    fold = cold_fold.fold_state
    monkeypatch.setattr(cold_fold, "fold_state",
                        lambda *a, **k: calls.append(1) or fold(*a, **k))
    return calls


def test_the_budget_sizes_the_ranges(store, dear, monkeypatch):
    monkeypatch.setattr(budget, "SMALLEST_RANGE", 10)
    view = store.pinned()
    assert cold_fold.range_size(view) == ranges.FOLD_RANGE  # no budget: the default
    with mf.memory_limit(SMALL):
        size = cold_fold.range_size(view)
    assert 10 <= size < 100


@pytest.mark.parametrize("verify", ["full", "incremental"])
def test_the_digest_of_every_row_is_the_same_under_a_small_budget(store, dear, monkeypatch,
                                                                   verify):
    monkeypatch.setattr(budget, "SMALLEST_RANGE", 10)
    monkeypatch.setattr(budget, "WHOLE_CEILING", 0)  # verify="full" folds range by range too
    plain = mf.digest(store, verify=verify)
    assert len(dear) == 1  # one range without a budget
    dear.clear()
    small = mf.digest(store, verify=verify, memory_limit=SMALL)
    assert len(dear) >= 5  # many ranges under it
    assert small.to_json() == plain.to_json()
    dear.clear()
    with mf.memory_limit(SMALL):  # the context manager sets the same budget
        assert mf.digest(store, verify=verify).hash == plain.hash
    assert len(dear) >= 5


def test_verify_full_reads_every_row_at_once_only_when_it_fits(store, dear, monkeypatch):
    whole = mf.digest(store, verify="full")
    assert dear == []  # a small store: the reference read, no range folded
    monkeypatch.setattr(budget, "WHOLE_ROW_BYTES", 10**6)  # too dear to read at once
    ranged = mf.digest(store, verify="full")
    assert len(dear) == 1 and ranged.to_json() == whole.to_json()
    assert ranged.rows_visited != whole.rows_visited  # two different reads


def _derived(store: mf.Store) -> dict[str, str]:
    """Every derived table's rows, as text (the rebuild's whole answer)."""
    view = store.pinned()
    out = {}
    for name in sorted(view.snapshot.tables):
        if name.startswith(("projections/", "derived/")) and view.partitions(name):
            frame = pl.read_parquet([view.path / p.path for p in view.partitions(name)])
            # the journal checkpoint records its files' identities (inode, times): each
            # copy's own
            out[name] = frame.drop("inode", "mtime_ns", "ctime_ns", strict=False).write_json()
    return out


def test_the_rebuild_is_the_same_under_a_small_budget(store, dear, monkeypatch, tmp_path):
    monkeypatch.setattr(budget, "SMALLEST_RANGE", 10)
    other = mf.Store.open(shutil.copytree(store.path, tmp_path / "other"))
    store.memory.rebuild_projections()
    ranges = len(dear)
    stages: list[str] = []
    other.memory.rebuild_projections(progress=lambda done, total, stage: stages.append(stage),
                                     memory_limit=SMALL)
    assert len(dear) - ranges >= 5
    assert stages[0] == "session projection" and "digest state" in stages
    assert _derived(other) == _derived(store)
    assert mf.digest(other).to_json() == mf.digest(store).to_json()


def test_a_budget_the_smallest_range_cannot_fit_is_refused_before_anything(store):
    generation = store.generation
    with pytest.raises(MemoryBudgetError, match=r"needs about .* raise it .*nothing was written"):
        mf.digest(store, verify="full", memory_limit="100MB")
    with pytest.raises(MemoryBudgetError) as caught:
        store.memory.rebuild_projections(memory_limit="100MB")
    assert caught.value.limit == 100_000_000 and caught.value.need > caught.value.limit
    assert store.generation == generation  # nothing was written


def test_bad_budgets_say_what_a_size_is(monkeypatch, store):
    with pytest.raises(InvalidInputError, match="not a size"):
        mf.memory_limit("plenty").__enter__()
    with pytest.raises(InvalidInputError, match="below"):
        budget.parse_memory("1MB")
    with pytest.raises(InvalidInputError, match="too large"):
        budget.parse_memory("9" * 400 + "GB")  # a float that overflows
    monkeypatch.setenv(budget.ENV, "2 parsecs")
    with pytest.raises(InvalidInputError, match="MEMFRAME_MEMORY_LIMIT"):
        mf.digest(store, verify="full")
    monkeypatch.setenv(budget.ENV, "3GiB")
    assert budget.current_limit() == 3 * 2**30
    with mf.memory_limit("1GB"):  # the call's own budget wins over the environment
        assert budget.current_limit() == 10**9


def test_the_command_line_takes_a_budget(store):
    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "memframe", *args], capture_output=True,
                              text=True, timeout=300)

    small = run("--memory-limit", "100MB", "digest", "--verify", "full", str(store.path))
    assert small.returncode == 1 and "needs about" in small.stderr
    assert "Traceback" not in small.stderr
    for audit in ("misses", "recalls"):  # the audits read every capsule's state too
        refused = run("--memory-limit", "100MB", "audit", audit, str(store.path))
        assert refused.returncode == 1 and "needs about" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr and refused.stdout == ""
    bad = run("--memory-limit", "lots", "digest", str(store.path))
    assert bad.returncode == 1 and "--memory-limit 'lots' is not a size" in bad.stderr
    ok = run("--memory-limit", "4GB", "digest", "--verify", "full", "--no-advance",
             str(store.path))
    assert ok.returncode == 0, ok.stderr
    assert pl.Series([ok.stdout]).str.json_decode().struct.field("total").item() > 300


def test_a_diff_over_a_long_range_is_the_same_under_a_small_budget(store, monkeypatch):
    from memframe.store import diff as store_diff

    middle = store.generation
    ids = store.table("capsules").select("id").collect()["id"].to_list()
    store.record_recall(ids[5:60])
    store.commit(lambda c: [c.forget(i, mode="purge") for i in ids[100:104]], operation="forget")
    store.relate(ids[200], ids[201], "supersedes")
    compared: list[int] = []
    compare = store_diff.StoreDiff._compare
    monkeypatch.setattr(store_diff.StoreDiff, "_compare",
                        lambda self, chunk: compared.append(len(chunk)) or compare(self, chunk))
    plain = [store.diff(1), store.diff(middle)]
    assert len(compared) == 2
    monkeypatch.setattr(store_diff, "COMPARE_BYTES", 2**20)
    monkeypatch.setattr(budget, "SMALLEST_RANGE", 10)
    with mf.memory_limit(SMALL):
        small = [store.diff(1), store.diff(middle)]
    assert len(compared) > 10  # many chunks of capsules
    assert plain[0].capsules.height == 400 and plain[1].fields.height > 50
    for a, b in zip(plain, small, strict=True):  # the answer (what it cost aside) is the same
        assert {**a.to_dict(), "rows_visited": 0} == {**b.to_dict(), "rows_visited": 0}
        assert a.capsules.write_json() == b.capsules.write_json()
        assert a.fields.write_json() == b.fields.write_json()
        assert a.rows("recalls").collect().equals(b.rows("recalls").collect())
    # drawn on a terminal, a bar per chunk, and the same answer
    from memframe import progress

    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with mf.memory_limit(SMALL), progress.showing(True):
        drawn = store.diff(middle)
    assert "diff" in terminal.text and "chunk" in terminal.text
    assert drawn.capsules.equals(plain[1].capsules) and drawn.fields.equals(plain[1].fields)

    class Chatty(progress._Silent):  # a bar whose update says it redrew, as tqdm's may
        def update(self, n: int = 1) -> bool:  # type: ignore[override]
            return True

    monkeypatch.setattr(progress, "bar", lambda *args: Chatty())
    with mf.memory_limit(SMALL):
        assert store.diff(middle).capsules.equals(plain[1].capsules)


class _Terminal:
    """A stderr that says it is a terminal, keeping what is written."""

    def __init__(self) -> None:
        self.text = ""

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.text += text
        return len(text)

    def flush(self) -> None:
        pass


def test_the_fold_draws_a_bar_per_range_only_when_asked(store, dear, monkeypatch):
    from memframe import progress

    monkeypatch.setattr(budget, "SMALLEST_RANGE", 10)
    monkeypatch.setattr(budget, "WHOLE_CEILING", 0)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    mf.digest(store, verify="full", memory_limit=SMALL)
    assert terminal.text == ""  # a library call is silent
    with progress.showing(True):
        mf.digest(store, verify="full", memory_limit=SMALL)
    assert "fold" in terminal.text and "range" in terminal.text


@pytest.fixture
def ranged(monkeypatch):
    """Counts the ranges an audit folds its capsule state in (`capsule_state_ranges`)."""
    from memframe.audit import state_ranges

    monkeypatch.setattr(budget, "RANGE_BYTES", 2**20)
    monkeypatch.setattr(budget, "SMALLEST_RANGE", 10)
    calls = []
    fold = state_ranges.capsule_state
    monkeypatch.setattr(state_ranges, "capsule_state", lambda t: calls.append(1) or fold(t))
    return calls


@pytest.mark.parametrize("audit", ["misses", "coverage"])
def test_the_audits_are_the_same_under_a_small_budget(store, ranged, audit):
    from memframe.audit import recall_coverage, recall_misses

    def run(**kwargs):
        if audit == "misses":
            return recall_misses(store, progress=False, **kwargs)
        return recall_coverage(store, **kwargs)

    plain = run()
    assert len(ranged) == 1
    small = run(memory_limit=SMALL)
    assert len(ranged) >= 6  # many ranges under it
    assert small.to_json() == plain.to_json()
    if audit == "misses":  # every kind of answer is found across the ranges
        assert set(plain.lifecycle["resolution"].drop_nulls()) == {"capsule", "receipt", "alias"}
        assert plain.vocabulary_size > 100
    else:
        assert 0 < plain.never_recalled.height < 400
    with mf.memory_limit(SMALL):  # the context manager sets the same budget
        assert run().to_json() == plain.to_json()
    with pytest.raises(MemoryBudgetError):  # refused before a read
        run(memory_limit="100MB")


def test_the_capsule_state_in_ranges_is_the_capsule_state(store, ranged):
    from memframe.audit.state_ranges import capsule_state_ranges

    whole = store.capsule_state().collect()
    columns = ["id", "status", "kind", "tier", "recall_count", "content", "forget_mode"]
    with mf.memory_limit(SMALL):
        parts = list(capsule_state_ranges(store.pinned(), columns))
    assert len(parts) >= 6 and sum(p.height for p in parts) == whole.height
    assert set(whole["status"]) == {"live", "superseded", "tombstoned"}
    got = pl.concat(parts).sort("id")
    assert got.equals(whole.select(columns).sort("id"))
    where = (pl.col("status") != "live") & pl.col("project_id").is_not_null()
    with mf.memory_limit(SMALL):
        some = pl.concat(capsule_state_ranges(store.pinned(), ["id"], where))
    assert some.sort("id").equals(whole.filter(where).select("id").sort("id"))
    assert 0 < some.height < whole.height
