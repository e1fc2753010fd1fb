"""Packaging: the distribution's name and every install command that names it; the sample
store found from a source checkout and from a built (non-editable) wheel."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from memframe.synth import sample_store_path

ROOT = Path(__file__).resolve().parent.parent


def test_a_checkout_finds_the_repository_sample_store():
    assert sample_store_path() == ROOT / "data" / "sample-store"


@pytest.mark.slow
def test_a_built_wheel_carries_the_sample_store_and_finds_it(tmp_path):
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "dist"), "-q"],
        capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("memframe_store-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    store_files = sorted(
        p.relative_to(ROOT / "data").as_posix()
        for p in (ROOT / "data" / "sample-store").rglob("*") if p.is_file()
    )
    assert store_files
    for name in store_files:
        assert f"memframe/_data/{name}" in names
    assert "memframe/_render/style.css" in names  # the one stylesheet ships with the code
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    probe = subprocess.run(
        [sys.executable, "-c",
         "import memframe.synth as s, memframe as mf; p = s.sample_store_path(); "
         "print(p); print(mf.Store.open(p).row_count('capsules')); "
         "assert '.mf-id' in mf.Store.open(p)._repr_html_()"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": ""},
    )
    assert probe.returncode == 0, probe.stderr
    path, capsules = probe.stdout.split()
    assert Path(path) == site / "memframe" / "_data" / "sample-store"
    assert int(capsules) > 1000


DISTRIBUTION = "memframe-store"
# What a user reads: the docs, the notebooks and every hint the package prints.
_READ = ["README.md", "docs/*.md", "notebooks/*.md", "notebooks/*.ipynb", "memframe/**/*.py",
         ".ci/run"]
_INSTALL = re.compile(r"pip3? install ([^`\n]+)")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _install_commands() -> list[tuple[str, list[str]]]:
    """Every ``pip install ...`` a reader can copy, as (file, requirement arguments)."""
    found = []
    for pattern in _READ:
        for path in sorted(ROOT.glob(pattern)):
            text = path.read_text(encoding="utf-8").replace('\\"', '"')
            for match in _INSTALL.finditer(text):
                words = []
                for word in match.group(1).split("#")[0].split("&&")[0].split():
                    word = word.strip("\"'`,;:)")
                    if word.startswith("-") or not word:
                        continue
                    words.append(word)
                found.append((str(path.relative_to(ROOT)), words))
    return found


def test_the_distribution_is_not_the_unrelated_memframe_on_pypi():
    # "memframe" on PyPI is another project (an AGPL database-backed DataFrame); the import
    # package and the command keep the name memframe, as scikit-learn installs sklearn.
    project = _project()
    assert project["name"] == DISTRIBUTION
    assert project["scripts"] == {"memframe": "memframe.cli:main"}


def test_every_install_command_in_the_docs_and_hints_works_from_a_checkout():
    """memframe is not on PyPI yet (its distribution name is reserved for a release), and
    the bare ``memframe`` there is an unrelated project: so no install command a reader can
    copy names a ``memframe*`` distribution. Each installs the checkout (with extras that
    exist) or third-party packages."""
    extras = set(_project()["optional-dependencies"])
    commands = _install_commands()
    # the README, the notebooks' README, docs/distributed.md and the Ray hint are read
    files = {f for f, _ in commands}
    assert {"README.md", "notebooks/README.md", "docs/distributed.md",
            "memframe/distributed.py", "memframe/digest/batch.py"} <= files, files
    for where, words in commands:
        for word in words:
            name = re.match(r"[A-Za-z0-9._-]*", word).group(0)
            wanted = re.findall(r"\[([^\]]*)\]", word)
            asked = {e.strip() for group in wanted for e in group.split(",")}
            if name.startswith(".") or name == "":
                # a source checkout (`pip install -e ".[ray]"`): its extras exist
                assert asked <= extras, (where, word)
            assert not name.lower().replace("_", "-").startswith("memframe"), (
                f"{where}: `pip install {word}` names a distribution that is not published "
                f"(or an unrelated one): install the checkout instead")


def test_the_readme_says_the_name_is_reserved_and_not_published():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "reserved for a release and not on PyPI today" in readme
    assert "python3 -m pip uninstall memframe" in readme


def _fake_site(tmp_path: Path) -> Path:
    """A site directory holding what ``pip install memframe`` (the unrelated project)
    leaves: its dist-info (with the RECORD importlib.metadata reads) and its package."""
    site = tmp_path / "site"
    info = site / "memframe-0.15.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: memframe\nVersion: 0.15.1\n")
    (info / "RECORD").write_text("memframe/__init__.py,,\nmemframe-0.15.1.dist-info/METADATA,,\n")
    (site / "memframe").mkdir()
    (site / "memframe" / "__init__.py").write_text("UNRELATED = True\n")
    return site


def _python(code: str, pythonpath: list[Path], cwd: Path) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=cwd, timeout=120,
                          env={**os.environ,
                               "PYTHONPATH": os.pathsep.join(map(str, pythonpath))})


def test_importing_beside_the_unrelated_memframe_warns_and_says_the_fix(tmp_path):
    site = _fake_site(tmp_path)
    run = _python("import memframe; print(memframe.Store.__name__)", [ROOT, site], tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Store"  # this one won the import
    assert "ShadowedPackageWarning" in run.stderr
    assert "memframe 0.15.1" in run.stderr and str(site) in run.stderr
    assert "python3 -m pip uninstall memframe" in run.stderr
    # `memframe info` says it too, and lists it in its JSON
    info = _python("import sys, warnings; warnings.simplefilter('ignore');"
                   "from memframe.cli import main; sys.exit(main(['info', '--format', 'json']))",
                   [ROOT, site], tmp_path)
    assert info.returncode == 0, info.stderr
    import json

    others = json.loads(info.stdout)["other_installs"]
    assert any("memframe 0.15.1" in o for o in others), others
    assert "pip uninstall memframe" in info.stderr


def test_a_lone_install_imports_without_any_warning(tmp_path):
    run = _python("import warnings; warnings.simplefilter('error'); import memframe, sys;"
                  "from memframe.cli import main; sys.exit(main(['info', '--format', 'json']))",
                  [ROOT], tmp_path)
    assert run.returncode == 0, run.stderr
    import json

    assert json.loads(run.stdout)["other_installs"] == []
    assert "uninstall" not in run.stderr


def test_the_grep_catches_the_unrelated_name(tmp_path, monkeypatch):
    # the check above must be able to fail: a hint naming the bare "memframe" is caught
    (tmp_path / "memframe").mkdir()
    (tmp_path / "memframe" / "hint.py").write_text('HINT = \'pip install "memframe[ray]"\'\n')
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (found,) = _install_commands()
    assert found == ("memframe/hint.py", ["memframe[ray]"])
    assert re.match(r"[A-Za-z0-9._-]*", found[1][0]).group(0) != DISTRIBUTION


def test_every_public_name_resolves_and_the_digest_result_class_is_public():
    import memframe as mf

    assert "Digest" in mf.__all__  # the class of what mf.digest(...) returns
    for name in mf.__all__:
        assert getattr(mf, name) is not None, name
    from memframe.digest.result import Digest

    assert mf.Digest is Digest
    namespace: dict[str, object] = {}
    exec("from memframe import *", namespace)
    assert set(mf.__all__) <= set(namespace)
