"""The dependency direction of docs/architecture.md, checked on every import in the package.

Every ``import`` and ``from ... import`` counts: at module level, inside functions, and
under ``TYPE_CHECKING`` (a type-only import is still a dependency a reader has to hold in
mind). A module may import its own layer and the layers below it, never one above; and no
set of modules imports itself in a circle. The one named exception is ``store.memory``,
which hands out the jobs that sit above the store.

The root package ``memframe`` is the public surface: it re-exports every layer, so it sits
above all of them but the command line, which calls the public API. A module below it that
imports ``memframe`` itself is an upward import and closes a circle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "memframe"

ROOT = "memframe"

#: bottom to top; a module belongs to the first prefix that names it (ROOT names only the
#: root package itself, not the modules under it). DESIGN.md section 1 puts ``state.py``, the
#: one capsule-state fold, in the base layer: the store calls it.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("memframe.errors", "memframe.ids", "memframe.schema", "memframe.text", "memframe.taint",
     "memframe.graph", "memframe.state", "memframe._render", "memframe._scalars",
     "memframe._install", "memframe.budget", "memframe.frames",
     "memframe.progress"),
    ("memframe.store",),
    ("memframe.derived",),
    ("memframe.projections",),
    ("memframe.digest", "memframe.audit", "memframe.importers", "memframe.synth"),
    ("memframe.jobs",),
    ("memframe.display", "memframe.distributed", "memframe.delta", "memframe.fleet"),
    (ROOT,),
    ("memframe.cli", "memframe.__main__"),
)

#: (importer, imported package): the only upward imports allowed
EXCEPTIONS = {("memframe.store.store", "memframe.jobs")}


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        names[name] = path
    return names


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every memframe module ``name`` imports, wherever the statement sits."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            targets = [f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                       for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def layer_of(name: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(name == p or (p != ROOT and name.startswith(p + ".")) for p in prefixes):
            return index
    raise AssertionError(f"{name} is in no layer: add it to LAYERS in tests/test_layers.py")


def edges() -> list[tuple[str, str]]:
    modules = module_names()
    return [(name, target) for name, path in sorted(modules.items())
            for target in sorted(imports_of(name, path, modules))]


def allowed(importer: str, imported: str) -> bool:
    return any(importer == a and (imported == b or imported.startswith(b + "."))
               for a, b in EXCEPTIONS)


def test_every_module_has_a_layer():
    for name in module_names():
        layer_of(name)


def test_no_module_imports_a_layer_above_its_own():
    upward = [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
              for a, b in edges() if layer_of(b) > layer_of(a) and not allowed(a, b)]
    assert not upward, "\n".join(upward)


def test_no_import_circle():
    graph = nx.DiGraph((a, b) for a, b in edges() if not allowed(a, b))
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, circles


@pytest.mark.parametrize("source, expected", [
    ("from memframe.jobs import cycle\n", {"memframe.jobs.cycle"}),
    ("def f():\n    from memframe.jobs.cycle import run_cycle\n", {"memframe.jobs.cycle"}),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memframe.jobs\n",
     {"memframe.jobs"}),
    ("from . import runs\n", {"memframe.derived.runs"}),
])
def test_the_checker_sees_every_kind_of_import(tmp_path, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source)
    modules = module_names()
    assert imports_of("memframe.derived.probe", path, modules) == expected


def test_the_checker_refuses_an_upward_import():
    assert layer_of("memframe.jobs.cycle") > layer_of("memframe.store.tables")
    assert not allowed("memframe.store.tables", "memframe.jobs")
    assert allowed("memframe.store.store", "memframe.jobs")


def test_the_root_package_is_checked_like_any_module(tmp_path):
    path = tmp_path / "probe.py"
    path.write_text("def f():\n    import memframe\n    return memframe.Store\n")
    assert imports_of("memframe.digest.probe", path, module_names()) == {ROOT}
    assert layer_of(ROOT) > layer_of("memframe.digest.batch")
    assert layer_of(ROOT) > layer_of("memframe.distributed")
    assert layer_of("memframe.cli") > layer_of(ROOT)


def test_state_sits_in_the_base_layer():
    """DESIGN.md section 1: ``state.py`` (pure, no I/O) is a base module the store calls."""
    assert layer_of("memframe.state") == 0 < layer_of("memframe.store.store")
    assert ("memframe.store.store", "memframe.state") in edges()


#: the reference computation of the digest (spec 001): its section modules, the fail-closed
#: checks, the store-wide families and the reference source. The incremental reader (the
#: door `reads`, `assemble`, `state/`) builds on them; they never build on it.
REFERENCE = ("capsules", "efforts", "planning", "counters", "telemetry", "ledger", "scope",
             "staged", "checks", "families", "source")
INCREMENTAL = ("memframe.digest.state", "memframe.digest.reads", "memframe.digest.assemble")


def test_the_reference_digest_never_imports_the_incremental_reader():
    found = [f"{a} imports {b}" for a, b in edges()
             if a in {f"memframe.digest.{m}" for m in REFERENCE}
             and any(b == p or b.startswith(p + ".") for p in INCREMENTAL)]
    assert not found, "\n".join(found)


#: the incremental machinery's lines at most this many times the reference's
MAX_INCREMENTAL_RATIO = 1.3


def _lines(paths: list[Path]) -> int:
    return sum(len(p.read_text().splitlines()) for p in paths)


def test_the_incremental_machinery_earns_its_lines():
    reference = _lines([PACKAGE / "digest" / f"{m}.py" for m in REFERENCE]
                       + [PACKAGE / "state.py", PACKAGE / "graph.py"])
    incremental = _lines(sorted((PACKAGE / "digest" / "state").glob("*.py"))
                         + sorted((PACKAGE / "derived").glob("*.py")))
    assert incremental <= MAX_INCREMENTAL_RATIO * reference, (
        f"memframe/digest/state/ and memframe/derived/ hold {incremental} lines, "
        f"{incremental / reference:.3f}x the reference's {reference}")


DIGEST = PACKAGE / "digest"
#: the most lines a module under memframe/digest/ holds (one concept a module)
MAX_DIGEST_LINES = 330
def test_no_two_digest_modules_share_a_file_name():
    seen: dict[str, list[str]] = {}
    for path in sorted(DIGEST.rglob("*.py")):
        if path.name != "__init__.py":
            seen.setdefault(path.name, []).append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in seen.items() if len(paths) > 1}
    assert not shared, shared


def test_no_digest_module_is_longer_than_its_limit():
    long = {str(path.relative_to(PACKAGE)): n for path in sorted(DIGEST.rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MAX_DIGEST_LINES}
    assert not long, f"split these along their concepts (at most {MAX_DIGEST_LINES} lines): {long}"


#: base modules the stamped code imports that compute no derived value: how much a chunk
#: holds (the answer is the same under any budget), progress bars, the install check, HTML
UNSTAMPED = {"memframe.budget", "memframe.progress", "memframe._install", "memframe._render"}


def test_every_module_the_derived_state_depends_on_is_in_its_writer_stamp():
    # a module the stamped code calls but the stamp leaves out could change a derived value
    # without dropping the state it computed (frames.py was left out once)
    from memframe.store import derived

    modules = module_names()
    stamped = {name for name in modules
               if any(name == f"memframe.{s.removesuffix('.py')}"
                      or name.startswith(f"memframe.{s}.") for s in derived._SOURCES)}
    needed = {target for name in stamped for target in imports_of(name, modules[name], modules)}
    missing = {n for n in needed - stamped
               if not any(n == u or n.startswith(u + ".") for u in UNSTAMPED)}
    assert not missing, f"add to memframe/store/derived.py _SOURCES: {sorted(missing)}"
