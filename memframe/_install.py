"""Is this the only ``memframe`` installed? (The import name is shared with an unrelated
project on PyPI, whose wheel installs a top-level ``memframe`` too.)

:func:`other_installs` is cheap (one directory listing per ``sys.path`` entry, no
``importlib.metadata``), so ``import memframe`` runs it every time and warns with
:class:`memframe.errors.ShadowedPackageWarning`; ``memframe info`` also asks
``importlib.metadata`` which distributions install a top-level ``memframe``
(:func:`other_distributions`, slower: it reads every installed distribution's file list).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from pathlib import Path

__all__ = ["DISTRIBUTION", "other_installs", "other_distributions", "shadow_message",
           "warn_if_shadowed"]

#: this project's distribution name (reserved for a release; install from a checkout)
DISTRIBUTION = "memframe-store"

_HERE = Path(__file__).resolve().parent
_DIST_INFO = re.compile(r"^(?P<name>memframe)-(?P<version>[^-]+)\.(?:dist|egg)-info$", re.I)


def other_installs(path: list[str] | None = None) -> list[str]:
    """Every trace of another ``memframe`` on ``path`` (default ``sys.path``): a
    ``memframe-<version>.dist-info`` (the unrelated PyPI project's wheel), or a
    ``memframe`` package directory that is not this project's (another checkout of this
    project is no trace). Each as a short description.

    Examples:
        >>> import tempfile, pathlib
        >>> d = pathlib.Path(tempfile.mkdtemp())
        >>> (d / "memframe-0.15.1.dist-info").mkdir()
        >>> other_installs([str(d)])[0].startswith("the distribution memframe 0.15.1 (")
        True
        >>> other_installs([str(_HERE.parent)])
        []
    """
    found: list[str] = []
    seen: set[Path] = set()
    for entry in sys.path if path is None else path:
        base = Path(entry or os.curdir)
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in sorted(names):
            match = _DIST_INFO.match(name)
            if match:
                found.append(f"the distribution memframe {match.group('version')} "
                             f"({base / name})")
        package = base / "memframe"
        if "memframe" in names and (package / "__init__.py").is_file():
            real = package.resolve()
            if real != _HERE and real not in seen and not _is_this_project(real):
                seen.add(real)
                found.append(f"another memframe package at {real}")
    return found


def _is_this_project(package: Path) -> bool:
    """A ``memframe`` directory of this project (another checkout or worktree of it, an
    older version): it holds the store format and the digest."""
    return (package / "store" / "log.py").is_file() and (package / "digest").is_dir()


def other_distributions() -> list[str]:
    """The installed distributions other than ``memframe-store`` whose files include a
    top-level ``memframe`` (as ``name version``), from ``importlib.metadata``."""
    from importlib import metadata

    names = metadata.packages_distributions().get("memframe", [])
    out = set()
    for name in names:
        if re.sub(r"[-_.]+", "-", name).lower() == DISTRIBUTION:
            continue
        try:
            out.add(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:  # pragma: no cover - listed, then removed
            out.add(name)
    return sorted(out)


def shadow_message(others: list[str]) -> str:
    """The note for ``others`` (what to do about them)."""
    return (f"memframe: {'; '.join(others)} also provides the import name `memframe`, and "
            f"only one of the two can be imported (this is memframe-store, from {_HERE.parent}). "
            f"The `memframe` on PyPI is an unrelated project: remove it with "
            f"`python3 -m pip uninstall memframe`, then reinstall this one from its checkout "
            f"with `python3 -m pip install -e .`")


def warn_if_shadowed() -> None:
    """Warn (:class:`~memframe.errors.ShadowedPackageWarning`) when another ``memframe``
    is installed beside this one."""
    others = other_installs()
    if others:
        from memframe.errors import ShadowedPackageWarning

        warnings.warn(shadow_message(others), ShadowedPackageWarning, stacklevel=3)
