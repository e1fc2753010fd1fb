"""The scripts under benchmarks/ still import: a renamed or deleted module they use fails
here, not on the day someone measures. Importing one must not run its benchmark."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py"))

# `python3 benchmarks/bench_x.py` puts benchmarks/ first on sys.path; so does the probe
_PROBE = """
import sys
sys.path.insert(0, sys.argv[1])
module = __import__(sys.argv[2])
assert callable(getattr(module, "main", None)), "no main()"
"""


def test_every_benchmark_script_is_probed():
    assert len(SCRIPTS) >= 12 and "bench_distributed" in SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_benchmark_script_imports_without_running(name):
    done = subprocess.run([sys.executable, "-c", _PROBE, str(BENCHMARKS), name],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "", f"importing {name} printed (did it run?): {done.stdout[:300]}"


def test_the_distributed_benchmark_reads_the_rebuilt_session_rows(tmp_path):
    spec = importlib.util.spec_from_file_location("_bench_distributed",
                                                  BENCHMARKS / "bench_distributed.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    store = bench.build_big(tmp_path / "s", 400)
    report = store.memory.rebuild_projections()
    rows = bench.rows_of(store)
    # bursts of 40 capsules per conversation: 10 conversations
    assert rows.height == report.rows_written == 10
    assert rows["conversation_id"].is_sorted()


def test_every_part_switched_off_answers_the_same_bytes(tmp_path, capsys):
    """bench_parts switches kept parts off by name: each switch must still reach its part
    (the variant reads more rows than the default digest) and keep the bytes."""
    import memframe as mf
    from tests.conftest import TickingClock

    spec = importlib.util.spec_from_file_location("_bench_parts", BENCHMARKS / "bench_parts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"ACTIVE(t{i % 3}): n {i}" if i % 4 == 0 else f"n {i}",
                         "source": "s", "anchor": "a", "project_id": f"p{i % 2}",
                         "kind": "epic" if i % 9 == 0 else None} for i in range(300)])
    store.relate(ids[1], ids[2], "blocks")
    store.record_recall(ids[:5])
    store.session_start("p0")
    assert store.memory.run_cycle().notes == ()
    assert module.main([str(tmp_path / "s"), "--calls", "1", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "same bytes in every variant: True" in out
    rows = {line[:20].strip(): int(line[20:].split()[1].replace(",", ""))
            for line in out.splitlines() if line.startswith("  ") and "variant" not in line
            and "same bytes" not in line}
    assert set(rows) == {*module.VARIANTS, "verify=full"}, rows
    for name in module.VARIANTS:
        if name != "all":
            assert rows[name] > rows["all"], (name, rows)


def test_the_diff_benchmark_finds_what_the_fold_finds(tmp_path, capsys):
    import memframe as mf
    from tests.conftest import TickingClock

    spec = importlib.util.spec_from_file_location("_bench_diff", BENCHMARKS / "bench_diff.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    store.ingest([{"content": f"n {i}", "source": "s", "anchor": "a"} for i in range(200)])
    assert module.main([str(tmp_path / "s"), "--changes", "20", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "same capsules and fields: True" in out
    rows = {line.split()[0]: int(line.split("rows read")[1].split()[0].replace(",", ""))
            for line in out.splitlines() if "rows read" in line}
    # the fold reads every state row at both ends: 200 capsules, then 218 and 2 recall rows
    assert rows["diff"] > 0 and rows["fold"] == 200 + 218 + 2, rows
    assert store.generation == 1  # the benchmark wrote to a copy, never to the store


def test_the_scale_benchmark_measures_each_path(tmp_path, capsys):
    """bench_scale runs each path in a child process and prints its time, peak and answer:
    the cold digest and verify="full" give the same answer."""
    from memframe.synth import synthesize

    spec = importlib.util.spec_from_file_location("_bench_scale", BENCHMARKS / "bench_scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    synthesize(tmp_path / "s", capsules=300)
    assert module.main(["--store", str(tmp_path / "s"), "--work", str(tmp_path / "w"),
                        "--paths", "full,cold,diff,rebuild"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()
             if line.strip().startswith("s ")]
    assert [line[1] for line in lines] == ["full", "cold", "diff", "rebuild"]
    assert all("GB" in line and "failed:" not in line for line in lines)
    assert lines[0][-1] == lines[1][-1]  # the same digest either way
    # the import path imports the SQLite file it is given into a new store
    spec = importlib.util.spec_from_file_location("_bench_import", BENCHMARKS / "bench_import.py")
    assert spec is not None and spec.loader is not None
    importer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(importer)
    importer.build(tmp_path / "m.db", 300)
    # instants a file of 30M capsules reaches are valid ones (they once ran into month 13)
    from memframe.text import parse_instant

    assert importer.stamp(29_030_399).startswith("2026-12-28T23:59:59")
    assert importer.stamp(29_030_400) == "2027-01-01T00:00:00.8917376Z"
    assert parse_instant(importer.stamp(30_000_000), "at").year == 2027
    assert module.main(["--store", str(tmp_path / "s"), "--work", str(tmp_path / "w"),
                        "--paths", "import", "--sqlite", str(tmp_path / "m.db")]) == 0
    imported = [line.split() for line in capsys.readouterr().out.splitlines()
                if line.strip().startswith("s ")]
    assert [line[1] for line in imported] == ["import"] and "failed:" not in imported[0]
    assert not (tmp_path / "w" / "imported").exists()  # the new store is removed after
    # the growth of each path from the first store size, as multiples of its figures
    results = {("s1", "cold", "now"): {"seconds": 2.0, "peak_mib": 100.0},
               ("s2", "cold", "now"): {"seconds": 9.0, "peak_mib": 150.0},
               ("s1", "full", "now"): {"error": "failed"}}
    assert module.growth(results, ["s1", "s2"]) == [
        "growth from s1: s2", "  cold     now     time x4.5, peak x1.5"]
    assert module.growth(results, ["s1"]) == []
