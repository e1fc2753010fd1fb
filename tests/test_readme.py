"""The README as a newcomer uses it: the first command, the tour (twice), the engine one-liners."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def test_the_first_command_installs_only_the_base_and_runs_the_digest():
    console = re.findall(r"```console\n(.*?)```", README, flags=re.S)[0].strip()
    assert console == "python3 -m pip install -e . && memframe digest"
    # the base dependencies are enough: no extra is imported by `memframe digest`
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    blocked = ["altair", "vl_convert", "ray", "duckdb", "playwright", "nbclient", "pytest"]
    assert "plot" not in extras  # memframe draws its charts itself
    code = ("import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
            + "from memframe.cli import main\nsys.exit(main(['digest', '--format', 'text']))")
    run = _run(code, ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("memframe digest  generation ")


def test_the_tour_runs_twice_and_shows_what_it_claims(tmp_path):
    tour = _python_blocks()[0]
    assert "exist_ok=True" in tour
    for attempt in (1, 2):
        run = _run(tour, tmp_path)
        assert run.returncode == 0, (attempt, run.stderr)
        # sessions with rows (the tour's conversation id), and the alias proposal
        assert "thread-7" in run.stdout, attempt
        assert re.search(r"retreival\s*┆\s*retrieval", run.stdout), run.stdout
        assert "True" in run.stdout  # known_hash -> unchanged
    import memframe as mf

    store = mf.Store.open(tmp_path / "my-store")
    assert store.memory.sessions().rows.get_column("conversation_id").to_list() == ["thread-7"]


def test_the_engine_one_liners_run_as_pasted(tmp_path):
    """The Delta one-liners: the Python block as pasted, and the DuckDB line through
    DuckDB's delta extension (its side environment, see tests/store/delta_readers.py)."""
    from tests.store.delta_readers import duckdb_python

    tour, oneliners = _python_blocks()[0], _python_blocks()[-1]
    assert "scan_delta" in oneliners and "DeltaTable" in oneliners
    assert _run(tour, tmp_path).returncode == 0
    run = _run(oneliners, tmp_path)
    assert run.returncode == 0, run.stderr
    assert "team/api" in run.stdout and "retreival" in run.stdout
    sql = re.findall(r"```sql\n(.*?)```", README, flags=re.S)[0]
    line = next(q for q in sql.splitlines() if "delta_scan" in q)
    assert '"at"' in line
    code = ("import duckdb, duckdb_ext, pathlib\n"
            "ext = next(pathlib.Path(duckdb_ext.__path__[0]).rglob('delta.duckdb_extension'))\n"
            "con = duckdb.connect(config={'allow_unsigned_extensions': 'true'})\n"
            "con.execute(f\"LOAD '{ext}'\")\n"
            # only the text column comes back to Python (a timestamp would need pytz)
            f"print(con.sql('select term from (' + {line.rstrip(';')!r} + ') limit 1')"
            f".fetchall()[0][0])\n")
    duck = subprocess.run([str(duckdb_python()), "-c", code], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert duck.returncode == 0, duck.stderr
    assert duck.stdout.strip() == "retreival"


def test_the_docs_point_only_inside_the_repository():
    """Every relative link and every file path named in backquotes that looks like one of
    the repository's files resolves inside it; nothing points beside the repository."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        assert "../" not in re.sub(r"`[^`]*`", "", text), f"{doc.name} points outside"
        links = re.findall(r"\]\(([^)#\s]+)\)", text)
        named = re.findall(r"`((?:memframe|tests|docs|benchmarks|notebooks|scripts)/[\w/.-]+"
                           r"\.(?:py|md|svg|ipynb))`", text)
        for target in links + named:
            if target.startswith(("http://", "https://")):
                continue
            path = (doc.parent / target) if target in links else (ROOT / target)
            assert path.resolve().is_relative_to(ROOT), f"{doc.name}: {target} leaves the repo"
            assert path.exists(), f"{doc.name} names {target}, which does not exist"


def test_the_hook_script_injects_the_digest_only_when_it_changed(tmp_path):
    """The README's session-start hook, run as written with a `memframe` on PATH: the
    first session gets the digest, the second nothing, and after a write the new one."""
    import json

    (hook,) = re.findall(r"```sh\n(.*?)```", README, flags=re.S)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "memframe"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m memframe \"$@\"\n")
    shim.chmod(0o755)
    home = tmp_path / "home"
    import memframe as mf

    store = mf.Store.create(home / ".agent" / "memory")
    store.ingest({"content": "first", "source": "s", "anchor": "a", "project_id": "p"})
    env = {"HOME": str(home), "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHONPATH": str(ROOT)}

    def session() -> subprocess.CompletedProcess:
        return subprocess.run(["sh", "-c", hook], env=env, capture_output=True, text=True,
                              timeout=300)

    first = session()
    assert first.returncode == 0, first.stderr
    body = json.loads(first.stdout)
    assert body["total"] == 1
    seen = (home / ".agent" / "digest.hash").read_text()
    assert seen == mf.digest(mf.Store.open(store.path)).hash + "\n"
    second = session()
    assert (second.returncode, second.stdout, second.stderr) == (0, "", "")
    store.ingest({"content": "second", "source": "s", "anchor": "a", "project_id": "p"})
    third = session()
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout)["total"] == 2
    assert (home / ".agent" / "digest.hash").read_text() != seen


def test_the_as_of_example_reads_the_sample_as_it_was():
    import json

    example = re.search(r"`memframe digest --as-of\s+(\S+)`", README)
    assert example, "the README's --as-of example"
    run = _run("import sys\nfrom memframe.cli import main\n"
               f"sys.exit(main(['digest', '--as-of', {example.group(1)!r}, '--format', 'json']))",
               ROOT)
    assert run.returncode == 0, run.stderr
    import memframe as mf
    from memframe.synth import sample_store_path

    store = mf.Store.open(sample_store_path())
    then = json.loads(run.stdout)
    assert then == mf.digest(store.as_of(example.group(1))).to_dict()
    assert then != mf.digest(store).to_dict()  # the store as it was, not as it is
