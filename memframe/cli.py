"""The ``memframe`` command: a thin shell over the public API (DESIGN.md section 6).

Exit codes: 0 success, 2 usage error, 1 a ``MemframeError`` (message on stderr, no
traceback), 130 interrupted (Ctrl-C). One output convention for every command: results go
to stdout, readable text on a terminal and JSON when piped or with ``--format json``;
stage messages and progress bars go to stderr, on a terminal only (``--quiet`` silences
them). Each subcommand imports only what it needs, so that ``memframe digest`` on the
sample store starts quickly.

Everything printed or written passes through :mod:`memframe._render.terminal`: stored and
source text can never drive the terminal, text reports are cut to its width, and JSON on a
terminal has its unsafe characters escaped (the same document). Piped JSON is the API's
bytes.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn

__all__ = ["main", "build_parser", "synopsis"]


class _UsageError(Exception):
    """A command line that cannot be run as given (exit code 2, like argparse's own)."""


class _Formatter(argparse.HelpFormatter):
    """Help that shows every option's default (when it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("%(default)" not in text and "(default" not in text and action.option_strings
                and default is not None and default is not False
                and default is not argparse.SUPPRESS):
            text += " (default: %(default)s)"
        return text


def _options_of(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option of ``parser`` and of its subcommands."""
    names: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                names += _options_of(child)
        names += [o for o in action.option_strings if o.startswith("--")]
    return names


class _Parser(argparse.ArgumentParser):
    """argparse, plus a suggestion when a command or option name is mistyped, and a hint
    when a writing command is given no STORE. Every usage error (argparse's and the
    commands' own) is printed in this one style, and made safe for the terminal."""

    def error(self, message: str) -> NoReturn:
        self.usage_error(message)
        self.exit(2)

    def usage_error(self, message: str) -> None:
        """Print a usage error in the one style: the usage line, then ``prog: error: ...``."""
        match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if match:
            choices = [c.strip(" '") for c in match.group(2).split(",")]
            near = difflib.get_close_matches(match.group(1), choices, n=1, cutoff=0.5)
            if near:
                message += f"; did you mean '{near[0]}'?"
        match = re.search(r"unrecognized arguments: (.*)", message)
        if match:
            known = sorted(set(_options_of(_ROOT[0] if _ROOT else self)))
            for word in match.group(1).split():
                flag = word.split("=", 1)[0]
                near = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
                if flag.startswith("-") and near:
                    message += f"; did you mean {near[0]}?"
                    break
        if "required: STORE" in message and self.prog.split()[-1] in _WRITERS:
            message += (f" (this command writes to the store; to try it on the sample, copy "
                        f"it first: cp -r {_default_store()} my-store)")
        from memframe._render.terminal import terminal_text

        self.print_usage(sys.stderr)
        print(_fit_message(terminal_text(f"{self.prog}: error: {message}")), file=sys.stderr)


_ROOT: list[argparse.ArgumentParser] = []  # the top-level parser, for option suggestions
_WRITERS = ("cycle", "rebuild", "vacuum", "compact")


def _headlines(value: str) -> int:
    """``--headlines`` as the reference CLI teaches it (reference 1.2)."""
    try:
        n = int(value, 10)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(
            f"--headlines requires a non-negative integer (the list cap N; totals stay exact), "
            f"got {json.dumps(value)}"
        )
    from memframe.digest.params import HEADLINES_MAX

    if n > HEADLINES_MAX:
        raise argparse.ArgumentTypeError(
            f"--headlines is an unsigned 64-bit count (at most {HEADLINES_MAX}), got "
            f"{value}; any cap at or above the number of capsules lists them all")
    return n


_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def _known_hash(value: str) -> str:
    """``--known-hash``: the whole 64-hex-character hash of an earlier answer. A shorter
    one (the 12 characters a text report shows) would never match, and the command would
    silently hand the whole body every time, so it is refused.

    Examples:
        >>> _known_hash("AB" * 32) == "ab" * 32
        True
        >>> _known_hash("8c5f36f8b225")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: give the whole hash of an earlier answer, 64 hex characters (0-9, a-f); got "8c5f36f8b225" (12 characters: the text report shows only the first 12). Print the whole hash with `memframe digest STORE --hash` (or read "hash" from `memframe sessions --format json`)
    """
    text = value.strip()
    if _HEX64.fullmatch(text):
        return text.lower()
    what = (f"{len(text)} characters: the text report shows only the first 12"
            if len(text) == 12 and re.fullmatch(r"[0-9a-fA-F]+", text) else
            f"{len(text)} characters" if re.fullmatch(r"[0-9a-fA-F]*", text) else
            "not hexadecimal")
    raise argparse.ArgumentTypeError(
        f"give the whole hash of an earlier answer, 64 hex characters (0-9, "
        f"a-f); got {json.dumps(value)} ({what}). Print the whole hash with `memframe "
        f"digest STORE --hash` (or read \"hash\" from `memframe sessions --format json`)")


def _positive(value: str) -> int:
    try:
        n = int(value, 10)
    except ValueError:
        n = 0
    if n <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {json.dumps(value)}")
    return n


def _default_store() -> Path:
    from memframe.synth import sample_store_path

    return sample_store_path()


def _open(path: str | None, *, as_of: str | None = None, args: Any = None) -> Any:
    from memframe.store import Store

    store = Store.open(path if path is not None else _default_store())
    if as_of is None:
        return store
    when = _generation_or_instant(as_of, "--as-of")
    view = store.at(when) if isinstance(when, int) else store.as_of(when)
    if view.generation == 0 and store.generation > 0 and args is not None:
        first = store.at(1).committed_at
        _say(args, f"note: {as_of} is before the store's first commit (generation 1, "
                   f"{_instant(first)}): this is the empty store", always=True)
    return view


def _instant(value: Any) -> str:
    """The one instant format of every text report: ``YYYY-MM-DD HH:MM:SSZ`` (UTC)."""
    from memframe._render.terminal import instant_text

    return instant_text(value)


def _check_out(out: str | None, *, directory: bool) -> None:
    """Refuse an ``--out`` that cannot be written before any work is done."""
    if out is None:
        return
    path = Path(out)
    blocked = next((p for p in path.parents if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise _UsageError(f"--out {out}: {blocked} is a file, so nothing can be written below "
                          f"it; name another path")
    if directory and path.exists() and not path.is_dir():
        raise _UsageError(f"--out {out} names an existing file; here --out is a directory "
                          f"(one file per store or project): name a new or existing directory")
    if not directory and path.is_dir():
        raise _UsageError(f"--out {out} names a directory; give the path of the file to write")


def _terminal() -> bool:
    return sys.stdout.isatty()


def _width() -> int | None:
    """The terminal's width when stdout is one (``COLUMNS`` wins, as ``shutil`` reads it)."""
    if not _terminal():
        return None
    return max(20, shutil.get_terminal_size().columns)


_SUFFIX = {"text": "txt", "json": "json", "html": "html"}


def _safe(text: str, fmt: str, *, to_terminal: bool) -> str:
    """Every text the command prints or writes passes here: a text report is made safe
    line by line (and cut to the terminal's width on one), JSON on a terminal has its
    unsafe characters escaped (the same document), HTML is escaped where it is built."""
    from memframe._render.terminal import json_for_terminal, terminal_text

    if fmt == "text":
        text = terminal_text(text, _width() if to_terminal else None)
    elif fmt == "json" and to_terminal:
        text = json_for_terminal(text)
    return text if text.endswith("\n") else text + "\n"


def _safe_pieces(text: str | Iterator[str], fmt: str, *, to_terminal: bool) -> Iterator[str]:
    """`_safe` of a text, or of a JSON document given in pieces (a report of millions of
    rows, never held whole): each piece escaped as the whole would be."""
    if isinstance(text, str):
        yield _safe(text, fmt, to_terminal=to_terminal)
        return
    from memframe._render.terminal import json_for_terminal

    assert fmt == "json", "only a JSON document comes in pieces"
    for piece in text:
        yield json_for_terminal(piece) if to_terminal else piece
    yield "\n"


def _emit(text: str | Iterator[str], fmt: str) -> None:
    """A result on stdout."""
    _STATUS.erase()
    for piece in _safe_pieces(text, fmt, to_terminal=_terminal()):
        sys.stdout.write(piece)


def _write_file(target: Path, text: str | Iterator[str], fmt: str) -> Path:
    """A result written to a file (atomically: a reader never sees half of it)."""
    if target.is_dir():
        raise _UsageError(f"--out {target} is a directory; name a file (for example "
                          f"{target / ('report.' + _SUFFIX[fmt])})")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            for piece in _safe_pieces(text, fmt, to_terminal=False):
                fh.write(piece)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, target)
    return target


def _out_dir(out: str) -> Path:
    target = Path(out)
    if target.exists() and not target.is_dir():
        raise _UsageError(f"--out {target} is a file; --out names a directory to write into")
    target.mkdir(parents=True, exist_ok=True)
    return target


def _say(args: argparse.Namespace, message: str, *, always: bool = False) -> None:
    """A message on stderr (made safe for the terminal): ``--quiet`` silences all but
    notes and errors (``always``)."""
    from memframe._render.terminal import terminal_text

    if getattr(args, "quiet", False) and not always:
        return
    _STATUS.erase()
    print(_fit_message(terminal_text(message), cut_it=not always), file=sys.stderr)


def _fit_message(text: str, *, cut_it: bool = False) -> str:
    """A (safe) message fitted to a terminal on stderr: a passing message is cut, a note
    or an error is wrapped (nothing of it lost)."""
    if not sys.stderr.isatty():
        return text
    import textwrap

    from memframe._render.terminal import cut

    width = max(20, shutil.get_terminal_size().columns)
    if cut_it:
        return "\n".join(cut(line, width) for line in text.split("\n"))
    return "\n".join(textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False)
                     for line in text.split("\n"))


def _format(args: argparse.Namespace, *, file_out: bool = False) -> str:
    """The output format: as asked, else readable text on a terminal and JSON otherwise."""
    if getattr(args, "format", None):
        return str(args.format)
    return "text" if _terminal() and not file_out else "json"


def _json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


class _Status:
    """One status line on stderr (a terminal only, not with ``--quiet``), rewritten in
    place as the command moves from stage to stage, and the whole command's time at the
    end: ``memframe digest: done in 14.2s``."""

    def __init__(self) -> None:
        self.show = False
        self.name = "memframe"
        self.started = time.perf_counter()
        self.pending = 0  # characters of an unfinished status line

    def start(self, args: argparse.Namespace) -> None:
        self.show = _progress(args)
        self.name = f"memframe {args.command}"

    def stage(self, text: str) -> None:
        if not self.show:
            return
        from memframe._render.terminal import cut, visible

        width = shutil.get_terminal_size().columns
        took = time.perf_counter() - self.started
        line = cut(visible(f"{self.name}: {text} ({took:.1f}s)"), max(20, width - 1))
        sys.stderr.write("\r" + line + " " * max(0, self.pending - len(line)))
        sys.stderr.flush()
        self.pending = len(line)

    def cycle(self, done: int, total: int, stage: str) -> None:
        self.stage(f"advancing the projections [{done + 1}/{total}] {stage}")

    def rebuild(self, done: int, total: int, stage: str) -> None:
        self.stage(f"rebuilding the projections [{done + 1}/{total}] {stage}")

    def clear(self) -> None:
        """End an unfinished status line (before a message or another progress bar)."""
        if self.pending:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.pending = 0

    def erase(self) -> None:
        """Take an unfinished status line off the screen (before a result or a message)."""
        if self.pending:
            sys.stderr.write("\r" + " " * self.pending + "\r")
            sys.stderr.flush()
            self.pending = 0

    def finish(self, ok: bool) -> None:
        if not self.show:
            return
        took = time.perf_counter() - self.started
        self.erase()
        print(f"{self.name}: {'done' if ok else 'stopped'} in {took:.1f}s", file=sys.stderr)


_STATUS = _Status()


# ---- digest ------------------------------------------------------------------------------

def _render_digest(d: Any, fmt: str) -> str:
    if fmt == "json":
        return str(d.to_json())
    if fmt == "html":
        return str(d.to_html())
    return str(d.to_text())


def _advance(store: Any, args: argparse.Namespace) -> None:
    """Run the projections' cycle (the digest's kept state included) first: a digest of a
    named store writes to it, so that the next call (the next session's hook) reads warm.

    The digest is exact without it (it reads the kept state plus every row above it). A
    frozen view (``--as-of``), the bundled sample store (no STORE) and ``--no-advance`` are
    read without writing. When the cycle fails (a store this process cannot write, a full
    disk, another writer), one note says so on stderr (also with ``--quiet``) and the
    digest is computed all the same, from what is on disk.
    """
    from memframe.errors import MemframeError
    from memframe.store import RemoteStore, Store

    if (args.no_advance or not args.stores or not isinstance(store, Store)
            or isinstance(store, RemoteStore)):  # a remote copy changes only by push
        return
    try:
        store.memory.run_cycle(progress=_STATUS.cycle)
    except (OSError, MemframeError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        _say(args, f"memframe {args.command}: note: could not advance the kept state of "
                   f"{store.path} ({type(exc).__name__}: {reason}); the digest is still exact "
                   f"(it reads the rows above the kept state); --no-advance reads without "
                   f"writing", always=True)


def _closest_projects(prefix: str, projects: list[str], n: int = 3) -> list[str]:
    """The projects (or their subtree roots) nearest to a prefix that matched nothing.

    Examples:
        >>> _closest_projects("tean", ["default", "team", "team/api", "ops"])
        ['team', 'team/api']
        >>> _closest_projects("team/ap", ["team", "team/api", "team/web"])[0]
        'team/api'
    """
    import difflib

    roots = sorted({"/".join(p.split("/")[:i]) for p in projects
                    for i in range(1, p.count("/") + 2)})
    near = difflib.get_close_matches(prefix, roots, n=n, cutoff=0.5)
    if not near:  # a differently spelled subtree: compare by its last segment too
        tail = prefix.rsplit("/", 1)[-1]
        near = [r for r in roots if difflib.get_close_matches(tail, [r.rsplit("/", 1)[-1]],
                                                              cutoff=0.6)][:n]
    return near


def _note_empty_fence(args: argparse.Namespace, store: Any, d: Any) -> None:
    """A ``--project-prefix`` that matches no project answers a valid, empty digest
    (exit 0); a note on stderr says so and names the closest projects."""
    if args.project_prefix is None or d.total or d.by_project:
        return
    from memframe.digest import core

    view = store.at(d.generation) if d.generation is not None and hasattr(store, "at") else store
    projects = [row["project_id"] for row in core.digest(view, headlines=0).by_project]
    if not projects:
        return  # an empty store: nothing is fenced out
    near = _closest_projects(args.project_prefix, projects)
    listed = ", ".join(projects[:8]) + (f" and {len(projects) - 8} more" if len(projects) > 8
                                        else "")
    _say(args, f"memframe digest: note: --project-prefix {json.dumps(args.project_prefix)} "
               f"matches no project of {store.path}, so the fenced sections are empty"
               + (f"; did you mean {' or '.join(json.dumps(p) for p in near)}?" if near else
                  f"; its projects: {listed}"), always=True)


def _digest_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"headlines": args.headlines, "project_prefix": args.project_prefix,
                              "verify": args.verify}
    if args.known_hash is not None:
        kwargs["known_hash"] = args.known_hash
    return kwargs


def _cmd_digest(args: argparse.Namespace) -> int:
    from memframe.digest import batch, core

    kwargs = _digest_kwargs(args)
    stores = args.stores or [str(_default_store())]
    _check_out(args.out, directory=True)
    fmt = _format(args, file_out=args.out is not None)
    if args.hash:
        clash = next((flag for flag, given in (
            ("--out", args.out is not None), ("--per-project", args.per_project is not None),
            ("--format", args.format is not None)) if given), None)
        if clash:
            raise _UsageError(f"--hash prints only the digest's hash (64 hex characters); "
                              f"it takes no {clash}: drop one of the two")
        if len(stores) != 1:
            raise _UsageError("--hash prints the hash of one digest; name one STORE")
    if args.changes:
        clash = next((flag for flag, given in (
            ("--hash", args.hash), ("--known-hash", args.known_hash is not None),
            ("--per-project", args.per_project is not None), ("several stores", len(stores) > 1))
            if given), None)
        if clash:
            raise _UsageError(f"--changes shows one digest and what changed since the previous "
                              f"session start; it does not go with {clash}")
    if args.per_project is not None:
        if len(stores) != 1:
            raise _UsageError("--per-project takes exactly one STORE")
        if args.known_hash is not None:
            raise _UsageError("--known-hash compares one digest; it does not apply to "
                              "--per-project (one digest per project)")
        return _per_project(args, stores[0], kwargs, fmt)
    if len(stores) == 1:
        store = _open(stores[0], as_of=args.as_of, args=args)
        _advance(store, args)
        _STATUS.stage(f"digest of {store.path} at generation {store.generation}")
        d = core.digest(store, **kwargs)
        _note_empty_fence(args, store, d)
        if args.changes:
            text = _with_changes(args, store, d, kwargs, fmt)
            if args.out is None:
                _emit(text, fmt)
            else:
                target = _out_dir(args.out) / f"{Path(store.path).name}.{_SUFFIX[fmt]}"
                _say(args, f"wrote {_write_file(target, text, fmt)}")
            return 0
        if args.hash:
            _STATUS.erase()
            sys.stdout.write(d.hash + "\n")
        elif args.out is None:
            _emit(_render_digest(d, fmt), fmt)
        else:
            target = _out_dir(args.out) / f"{Path(store.path).name}.{_SUFFIX[fmt]}"
            _say(args, f"wrote {_write_file(target, _render_digest(d, fmt), fmt)}")
        return 0
    if args.as_of is not None:
        raise _UsageError("--as-of reads one store as it was; name one STORE (or run one "
                          "command per store)")
    if args.out is None:
        raise _UsageError("several stores need --out DIR (one file per store)")
    names = [Path(s).name for s in stores]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise _UsageError(f"two stores are named {twice[0]!r}, and the store's directory name "
                          f"names its file in --out: digest them into separate --out folders")
    out = _out_dir(args.out)
    _say(args, f"memframe digest: {len(stores)} stores into {out}")
    _STATUS.clear()
    if getattr(args, "engine", "processes") == "ray":
        from memframe.distributed import digest_many as ray_digest_many

        report = ray_digest_many(stores, engine="ray", address=args.address,
                                 progress=_progress(args), **kwargs)
    else:
        report = batch.digest_many(stores, progress=_progress(args), **kwargs)
    for path, d in report.digests.items():
        _write_file(out / f"{Path(path).name}.{_SUFFIX[fmt]}", _render_digest(d, fmt), fmt)
    for path, error in report.failures.items():
        _say(args, f"memframe digest: {path}: {error}", always=True)
    _say(args, f"digested {len(report.digests)} store(s) into {out}; "
               f"{len(report.failures)} failed", always=bool(report.failures))
    return 1 if report.failures else 0


def _fleet_sources(names: Sequence[str]) -> list[str]:
    """Each STORE-OR-DIR: a store as itself, a directory or URL prefix as the stores under
    it; a path that is neither (or a directory holding no store) is kept, so its row says
    what is wrong with it."""
    from memframe.fleet import list_stores
    from memframe.store import Store

    paths: list[str] = []
    for name in names:
        local = name[len("file://"):] if name.startswith("file://") else name
        listed = []
        if "://" in local or (Path(local).is_dir() and not Store.is_store(local)):
            listed = list_stores(name)
        paths += listed or [name]
    return paths


def _days(value: str) -> float:
    try:
        days = float(value)
    except ValueError:
        days = -1.0
    if not days >= 0 or days == float("inf"):
        raise argparse.ArgumentTypeError(
            f"expected a non-negative number of days (for example 7 or 0.5), got {json.dumps(value)}")
    return days


def _now(value: str) -> Any:
    import datetime as dt

    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise argparse.ArgumentTypeError(
            f"expected an instant with its offset, such as 2026-09-01T00:00:00Z, got "
            f"{json.dumps(value)}")
    return when


def _cmd_fleet(args: argparse.Namespace) -> int:
    import datetime as dt

    from memframe.fleet import fleet

    if args.html is not None:
        _check_out(args.html, directory=False)
    if args.engine == "local" and args.address is not None:
        raise _UsageError("--address names a Ray cluster; give it with --engine ray")
    paths = _fleet_sources(args.stores)
    _STATUS.stage(f"fleet of {len(paths)} store(s)")
    _STATUS.clear()
    result = fleet(paths, engine=args.engine, now=args.now, address=args.address,
                   stale_after=dt.timedelta(days=args.stale_days),
                   orphan_after=dt.timedelta(days=args.orphan_days), progress=_progress(args))
    if args.html is not None:
        _say(args, f"wrote {_write_file(Path(args.html), result.to_html(), 'html')}")
    if args.json or not _terminal():
        _emit(result.to_json(), "json")
    else:
        _emit(result.to_text(width=min(_FLEET_WIDTH, _width() or _FLEET_WIDTH)), "text")
    for path, error in result.errors.items():
        _say(args, f"memframe fleet: {path}: {error}", always=True)
    return 1 if result.errors else 0


#: the widest the fleet's table is drawn on a terminal
_FLEET_WIDTH = 80


def _with_changes(args: argparse.Namespace, store: Any, d: Any, kwargs: dict[str, Any],
                  fmt: str) -> str:
    """The digest ``d`` and, under it, what changed since the scope's previous session
    start (`memframe.digest.digest_diff.previous_session_start`): the digest diff from the
    digest that start read (same headlines and prefix) to ``d``."""
    from memframe.digest import core
    from memframe.digest.digest_diff import digest_diff, previous_session_start
    from memframe.errors import DigestFailedError, GenerationNotFoundError

    view = store.at(d.generation) if d.generation is not None else store
    prior = previous_session_start(view, args.project_prefix)
    scope = f"project prefix {args.project_prefix!r}" if args.project_prefix else "the store"
    if prior is None:
        _say(args, f"memframe digest: note: no earlier session start of {scope}: nothing to "
                   f"compare with", always=True)
        changes = None
        since = None
    else:
        generation, session_id = prior
        since = {"session_id": session_id, "generation": generation}
        _STATUS.stage(f"digest at generation {generation} (session {session_id} started)")
        past = store.at(generation)
        try:
            changes = digest_diff(core.digest(past, **kwargs), d) if past.readable() else None
        except (GenerationNotFoundError, DigestFailedError):
            if past.readable():
                raise  # a fault of its own, not a vacuum's
            changes = None
        if changes is None:
            # a vacuum removed what that generation read: the digest is still the answer
            _say(args, f"memframe digest: note: generation {generation}, where session "
                       f"{session_id} started, is no longer readable (a vacuum removed its "
                       f"files; `memframe info {store.path}` lists the readable "
                       f"generations): the changes since then are left out", always=True)
    if fmt == "json":
        return _json({"digest": json.loads(d.to_json()), "since": since,
                      "changes": None if changes is None else changes.to_dict()})
    if fmt == "html":
        from memframe._render.html import esc

        head = (f"<h1>Changes since session {esc(since['session_id'])} started</h1>"
                if since else f"<h1>No earlier session start of {esc(scope)}</h1>")
        if since and changes is None:
            head += (f"<p>Generation {since['generation']} is no longer readable (a vacuum "
                     f"removed its files): the changes are left out.</p>")
        body = head + (changes._html_body() if changes is not None else "")
        # the changes go inside the digest's page, after its sections
        return str(d.to_html()).replace("</main></body>", body + "</main></body>", 1)
    if since and changes is not None:
        under = (f"changes since session {since['session_id']} started (generation "
                 f"{since['generation']}):\n" + changes.to_text(_width() or 80))
    elif since:
        under = (f"changes since session {since['session_id']} started (generation "
                 f"{since['generation']}): no longer readable (vacuumed)\n")
    else:
        under = f"no earlier session start of {scope}\n"
    return d.to_text() + "\n" + under


def _per_project(args: argparse.Namespace, path: str, kwargs: dict[str, Any], fmt: str) -> int:
    from memframe.digest import batch

    store = _open(path, as_of=args.as_of, args=args)
    _advance(store, args)
    kwargs.pop("project_prefix")
    _STATUS.stage(f"per-project digests of {store.path} at depth {args.per_project}")
    digests = batch.per_project_digests(store, args.per_project, **kwargs)
    if args.out is None:
        for root, d in digests.items():
            if fmt == "json":
                _emit(_json({"project": root, "digest": json.loads(d.to_json())}), fmt)
            elif fmt == "html":
                _emit(_render_digest(d, fmt), fmt)
            else:
                _emit(f"== project {root}\n" + _render_digest(d, fmt), fmt)
        return 0
    out = _out_dir(args.out)
    for root, d in digests.items():
        name = f"{batch.project_file_stem(root)}.{_SUFFIX[fmt]}"
        _write_file(out / name, _render_digest(d, fmt), fmt)
    _say(args, f"wrote {len(digests)} digest(s) to {out}")
    return 0


# ---- projections -------------------------------------------------------------------------

def _sessions_text(page: Any) -> str:
    """The sessions page as a terminal report: the newest first, one instant format."""
    if page.unchanged:
        return f"unchanged (the known hash matches: {page.hash[:12]}); no rows"
    shown = page.rows.height
    lines = [f"{'newest ' + format(shown, ',') + ' of ' if shown < page.total else ''}"
             f"{page.total:,} session(s); {page.rows_visited:,} rows read; hash {page.hash[:12]}"]
    if shown:
        # the conversation id last and whole where it fits (a UUID does at 80 columns);
        # the JSON has every column
        lines.append(f"  {'last activity':<20}  {'memories':>8}  {'live':>6}  conversation")
    for row in page.rows.iter_rows(named=True):
        lines.append(f"  {_instant(row['last_at']):<20}  {row['memory_count']:>8,}  "
                     f"{row['live_count']:>6,}  {row['conversation_id']}")
    return "\n".join(lines)


def _cmd_sessions(args: argparse.Namespace) -> int:
    import polars as pl

    from memframe.text import rfc3339

    store = _open(args.store, as_of=args.as_of, args=args)
    page = store.memory.session_digest(limit=args.limit, known_hash=args.known_hash)
    if _format(args) == "text":
        _emit(_sessions_text(page), "text")
        return 0
    rows = page.rows.drop("line").with_columns(
        rfc3339(pl.col(c)).alias(c) for c, d in page.rows.schema.items()
        if isinstance(d, pl.Datetime))
    _emit(_json({"hash": page.hash, "unchanged": page.unchanged,
                 "rows_visited": page.rows_visited, "total": page.total,
                 "sessions": rows.to_dicts()}), "json")
    return 0


def _report(args: argparse.Namespace, body: dict[str, Any], text: str) -> None:
    fmt = _format(args)
    _emit(text if fmt == "text" else _json(body), fmt)


def _cycle_text(verb: str, body: dict[str, Any]) -> str:
    landed = (f"generation {body['generation']}" if body.get("generation") is not None
              else "nothing to commit")
    parts = body.get("projections") or {"session": body}
    session = parts.get("session", body)
    others = sum(p["rows_written"] for name, p in parts.items() if name != "session")
    extra = f" and {others:,} derived row(s)" if others else ""
    merged = sum((body.get("merged_parts") or {}).values())
    first = f"; {merged:,} small partitions merged first" if merged else ""
    return (f"{verb}: folded {body['rows_folded']:,} rows, wrote {session['rows_written']:,} "
            f"session rows{extra} ({body['rows_visited']:,} rows read); watermark "
            f"{body['watermark']:,}; {landed}{first}")


def _cmd_cycle(args: argparse.Namespace) -> int:
    store = _open(args.store)
    body = store.memory.run_cycle(progress=_STATUS.cycle).to_dict()
    _report(args, body, _cycle_text("cycle", body))
    return 0


def _cmd_rebuild(args: argparse.Namespace) -> int:
    store = _open(args.store)
    body = store.memory.rebuild_projections(progress=_STATUS.rebuild).to_dict()
    _report(args, body, _cycle_text("rebuild", body))
    return 0


# ---- audits, imports, synthesis, maintenance -----------------------------------------------

def _cmd_audit_misses(args: argparse.Namespace) -> int:
    from memframe.audit import recall_misses

    _check_out(args.out, directory=False)
    store = _open(args.store)
    _STATUS.stage(f"recall-miss audit of {store.path}")
    _STATUS.clear()
    audit = recall_misses(store, since=args.since, until=args.until, progress=_progress(args))
    fmt = _format(args, file_out=args.out is not None)
    if fmt == "json":
        text = audit.to_json()
    elif fmt == "html":
        text = audit.to_html()
    else:
        text = audit.to_text()
    if args.out is None:
        _emit(text, fmt)
    else:
        _say(args, f"wrote {_write_file(Path(args.out), text, fmt)}")
    return 0


def _audit_report(args: argparse.Namespace, audit: Any) -> int:
    """Print an audit, or write it to ``--out``, in ``--format`` (text, JSON, HTML)."""
    fmt = _format(args, file_out=args.out is not None)
    text: str | Iterator[str]
    if fmt == "json" and hasattr(audit, "json_pieces"):
        text = audit.json_pieces()  # a report of millions of rows is never held whole
    else:
        text = {"json": audit.to_json, "html": audit.to_html}.get(fmt, audit.to_text)()
    if args.out is None:
        _emit(text, fmt)
    else:
        _say(args, f"wrote {_write_file(Path(args.out), text, fmt)}")
    return 0


def _cmd_audit_recalls(args: argparse.Namespace) -> int:
    from memframe.audit import recall_coverage

    _check_out(args.out, directory=False)
    store = _open(args.store)
    _STATUS.stage(f"recall-coverage audit of {store.path}")
    _STATUS.clear()
    return _audit_report(args, recall_coverage(store, since=args.since, until=args.until,
                                               project_prefix=args.project_prefix))


def _cmd_audit_trust(args: argparse.Namespace) -> int:
    from memframe.audit import trust

    _check_out(args.out, directory=False)
    store = _open(args.store)
    _STATUS.stage(f"trust audit of {store.path}")
    _STATUS.clear()
    return _audit_report(args, trust(store))


def _bound(text: str | None, name: str) -> Any:
    """A ``--since``/``--until`` value: a generation number or an instant."""
    if text is None:
        return None
    from memframe.text import parse_instant

    when = _generation_or_instant(text, f"--{name}")
    return when if isinstance(when, int) else parse_instant(when, name)


def _generation_or_instant(text: str, flag: str) -> int | str:
    """A generation number (ASCII digits) as an int, or the text of an instant (parsed by
    the caller). A signed number, or more digits than any generation counter holds, is
    refused with what to give instead (never a raw conversion error).

    Examples:
        >>> _generation_or_instant(" 12 ", "--since"), _generation_or_instant("2026-07-01", "--since")
        (12, '2026-07-01')
    """
    bare = text.strip()
    if re.fullmatch(r"[+-][0-9]+", bare):
        raise _UsageError(f"{flag} {bare}: a generation number is 0 or more (0 is the empty "
                          f"store; `memframe info STORE` shows the newest); or give an "
                          f"ISO 8601 instant such as 2026-07-01")
    if not re.fullmatch(r"[0-9]+", bare):
        return text
    if len(bare) > 19:  # past a signed 64-bit counter: no store holds that generation
        raise _UsageError(f"{flag} {bare[:24]}... ({len(bare)} digits) is past any generation "
                          f"a store can hold; `memframe info STORE` shows the newest")
    return int(bare)


def _cmd_diff(args: argparse.Namespace) -> int:
    _check_out(args.out, directory=False)
    store = _open(args.store)
    _STATUS.stage(f"diff of {store.path}")
    found = store.diff(_bound(args.since, "since"), _bound(args.until, "until"))
    _STATUS.clear()
    return _audit_report(args, found)


def _explain_text(frame: Any, head: str, width: int) -> str:
    """The explain rows as a table of ``width`` columns, each reason wrapped under its own
    column (stored text made visible before it is measured)."""
    import textwrap

    from memframe._render.terminal import visible

    indent = " " * 28
    lines = [head, f"{'section':<14} {'listed':<6} {'rank':>4}  reason"]
    for section, listed, rank, reason in frame.iter_rows():
        first = f"{section:<14} {'yes' if listed else 'no':<6} {'-' if rank is None else rank:>4}  "
        lines += textwrap.wrap(visible(reason), max(20, width), initial_indent=first,
                               subsequent_indent=indent, break_on_hyphens=False)
    return "\n".join(lines)


def _cmd_explain(args: argparse.Namespace) -> int:
    from memframe._render.html import html_table, page
    from memframe.digest.explain import explain

    store = _open(args.store)
    _STATUS.stage(f"explain {args.capsule_id} in {store.path}")
    frame = explain(store, args.capsule_id, project_prefix=args.project_prefix,
                    headlines=args.headlines)
    fence = f"prefix {args.project_prefix}" if args.project_prefix is not None else "unfenced"
    head = (f"why {args.capsule_id} is or is not in each list of the digest "
            f"(headlines {args.headlines}, {fence})")
    fmt = _format(args)
    if fmt == "json":
        text = _json({"id": args.capsule_id, "headlines": args.headlines,
                      "project_prefix": args.project_prefix, "sections": frame.to_dicts()})
    elif fmt == "html":
        text = page(f"memframe explain {args.capsule_id}",
                    html_table(frame, caption=head, numeric_right=True))
    else:
        text = _explain_text(frame, head, _width() or 80)
    _emit(text, fmt)
    return 0


def _cmd_import_nmemory(args: argparse.Namespace) -> int:
    from memframe.importers import import_nmemory

    if _progress(args):
        _say(args, f"memframe import: reading {args.sqlite} into {args.store}")
    report = import_nmemory(args.sqlite, args.store, progress=_progress(args))
    fmt = _format(args)
    if fmt == "text":
        _emit(str(report), fmt)
    else:
        _emit(_json({"mode": report.mode, "source": str(report.source),
                     "store": str(report.store), "generation": report.generation,
                     "rows_written": report.rows_written, "source_rows": report.source_rows,
                     "read": report.read, "added": report.added, "skipped": report.skipped,
                     "erased": report.erased, "notes": list(report.notes)}), fmt)
    return 0


def _synth_target(out: str) -> None:
    """``memframe synth`` writes a new store: say what to do when OUT is taken."""
    from memframe.store.log import MARKER

    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        if (target / MARKER).is_file():
            raise _UsageError(
                f"{target} already holds a store (perhaps from an interrupted synth); "
                f"memframe synth writes a new store: remove it first "
                f"(rm -r -- {shlex.quote(str(target))}) or "
                f"name a new directory")
        raise _UsageError(f"{target} already holds files; memframe synth writes a new store "
                          f"into a new or empty directory")


def _synth_start(args: argparse.Namespace) -> Any:
    """Where the synthetic timeline starts so that it ends at ``--end`` (default: now, so
    the store holds no future: rows added afterwards land after it)."""
    import datetime as dt

    from memframe.errors import InvalidInputError
    from memframe.synth import SynthParams

    if args.end is None:
        end = dt.datetime.now(dt.UTC).replace(microsecond=0)
    else:
        try:
            end = dt.datetime.fromisoformat(args.end)
        except ValueError:
            raise _UsageError(f"--end takes an ISO 8601 instant such as 2026-12-01T09:00:00Z; "
                              f"got {json.dumps(args.end)}") from None
        if end.tzinfo is None:
            end = end.replace(tzinfo=dt.UTC)
    try:
        span = SynthParams.for_capsules(args.capsules).span_days
    except InvalidInputError as exc:
        raise _UsageError(str(exc).replace("capsules to hold", "capsules (--capsules) to "
                                           "hold")) from None
    return end - dt.timedelta(days=span)


def _cmd_synth(args: argparse.Namespace) -> int:
    from memframe.synth import synthesize

    _synth_target(args.out)
    start = _synth_start(args)
    _STATUS.clear()
    store = synthesize(args.out, capsules=args.capsules, seed=args.seed, progress=_progress(args),
                       noise=args.noise, misses=args.misses, clock_start=start,
                       receipts=args.receipts)
    _say(args, f"wrote a synthetic store of {store.row_count('capsules'):,} capsules to "
               f"{args.out}")
    return 0


def _readable(store: Any, limit: int = 1000) -> tuple[int, bool]:
    """The oldest generation from which every later one is readable (all files present),
    walking back from the newest at most ``limit`` generations; and whether the walk
    reached generation 1 (so the whole history is readable)."""
    newest = store.generation
    oldest = newest
    for g in range(newest, max(0, newest - limit), -1):
        if not store.at(g).readable():
            return oldest, False
        oldest = g
    return oldest, oldest <= 1


def _other_installs() -> list[str]:
    """Every other install of the import name ``memframe`` (the unrelated PyPI project's
    wheel, another package directory, any distribution whose files hold one)."""
    from memframe._install import other_distributions, other_installs

    found = other_installs()
    listed = " ".join(found)
    for dist in other_distributions():
        name, _, version = dist.partition(" ")
        if f"memframe {version} (" not in listed or name.lower() != "memframe":
            found.append(f"the distribution {dist}")
    return found


def _cmd_info(args: argparse.Namespace) -> int:
    from memframe.schema import CANONICAL_TABLES

    store = _open(args.store)
    view = _open(args.store, as_of=args.as_of, args=args).pinned()
    newest = store.generation
    oldest, whole = _readable(store)
    tables = {n: {"rows": view.row_count(n), "partitions": len(view.files(n))}
              for n in CANONICAL_TABLES}
    others = _other_installs()
    if others:
        from memframe._install import shadow_message

        _say(args, shadow_message(others), always=True)
    if _format(args) == "json":
        info = {
            "path": getattr(store, "url", None) or str(view.path),
            "generation": view.generation,
            "committed_at": view.committed_at,
            "newest_generation": newest,
            "readable_generations": ({"oldest": oldest, "newest": newest,
                                      "whole_history": whole} if newest else None),
            "tables": tables,
            "watermarks": dict(view.watermarks),
            "other_installs": others,
        }
        _emit(json.dumps(info, indent=2, ensure_ascii=False), "json")
        return 0
    when = f", committed {_instant(view.committed_at)}" if view.committed_at else ""
    lines = [f"store {getattr(store, 'url', None) or view.path}",
             f"generation {view.generation:,}{when}" + (
                 f" (the newest is {newest:,})" if view.generation != newest else "")]
    if newest == 0:
        lines.append("an empty store (no generation yet)")
    elif whole:
        lines.append(f"readable generations: 1..{newest} (the whole history: --as-of "
                     f"reaches every one)")
    else:
        lines.append(f"readable generations: {oldest}..{newest} (--as-of reaches back to "
                     f"{oldest}):")
        lines.append("  (older generations lost their files to compaction and vacuum)")
    lines.append("")
    lines.append(f"  {'table':<16}  {'rows':>12}  {'partitions':>10}")
    for name, t in tables.items():
        lines.append(f"  {name:<16}  {t['rows']:>12,}  {t['partitions']:>10,}")
    _emit("\n".join(lines), "text")
    return 0


def _size(n: int) -> str:
    """A byte count for people.

    Examples:
        >>> _size(0), _size(999), _size(1_234), _size(2_500_000), _size(3 * 10**9)
        ('0 bytes', '999 bytes', '1.2 kB', '2.5 MB', '3.0 GB')
    """
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:,} bytes"


def _cmd_vacuum(args: argparse.Namespace) -> int:
    report = _open(args.store).vacuum(
        retention_hours=args.retention_hours, allow_short_retention=args.allow_short_retention,
        dry_run=args.dry_run, grace_seconds=args.grace_seconds)
    verb = "would remove" if report["dry_run"] else "removed"
    lines = [f"vacuum{' --dry-run' if report['dry_run'] else ''}: {verb} "
             f"{report['partitions']:,} partition file(s) and {report['temporary']:,} "
             f"temporary file(s) (retention {report['retention_hours']:g} h)",
             f"{'would free' if report['dry_run'] else 'freed'} {_size(report['bytes'])}"]
    if report["dry_run"]:
        lines += [f"  {path}" for path in report["files"]]
    lost = report["no_longer_readable"]
    if lost:
        lines.append(f"generations {lost[0]}..{lost[1]} "
                     f"{'would stop' if report['dry_run'] else 'stopped'} being readable")
    readable = report["readable"]
    lines.append(f"readable generations{' after it' if report['dry_run'] else ''}: "
                 + (f"{readable[0]}..{readable[1]}" if readable else "none (an empty store)"))
    _report(args, report, "\n".join(lines))
    return 0


def _cmd_push(args: argparse.Namespace) -> int:
    report = _open(args.store).push(args.url, progress=not args.quiet and _terminal())
    pushed = report["generations_pushed"]
    lines = [(f"push: {args.url} is at generation {report['generation']:,}; generations "
              f"{pushed[0]:,}..{pushed[1]:,} pushed" if pushed else
              f"push: {args.url} was current (generation {report['generation']:,})"),
             f"uploaded {report['files']:,} file(s), {_size(report['bytes'])}; deleted "
             f"{report['deleted']:,} file(s) a vacuum removed here; {report['requests']:,} "
             f"request(s)"]
    _report(args, report, "\n".join(lines))
    return 0


def _cmd_delta_sync(args: argparse.Namespace) -> int:
    report = _open(args.store).sync_delta_logs(rebuild=args.rebuild)
    written = sum(report["versions"].values())
    lines = [f"delta sync: {args.store} keeps Delta logs, mirrored through generation "
             f"{report['generation']:,}; wrote {written:,} Delta version(s)"]
    lines += _delta_table_lines(report["tables"])
    _report(args, report, "\n".join(lines))
    return 0


def _cmd_delta_status(args: argparse.Namespace) -> int:
    report = _open(args.store).delta_logs_status()
    if not report["enabled"]:
        text = (f"delta status: {args.store} keeps no Delta logs (start them with "
                f"`memframe delta sync {args.store}`)")
    else:
        behind = report["synced_through"] < report["generation"]
        text = "\n".join([
            f"delta status: mirrored through generation {report['synced_through']:,} of "
            f"{report['generation']:,}" + ("; behind: run `memframe delta sync`" if behind
                                           else ""),
            *_delta_table_lines(report["tables"])])
    _report(args, report, text)
    return 0


def _cmd_delta_duckdb(args: argparse.Namespace) -> int:
    from memframe import delta

    store = _open(args.store)
    delta.table_path(store, "capsules")  # the logs exist (else: how to start them)
    extension = Path(args.extension) if args.extension else delta.duckdb_extension()
    if not extension.is_file():
        raise _UsageError(f"--extension {args.extension}: no such file; give the path of "
                          f"delta.duckdb_extension (the duckdb-ext-delta package installs it)")
    _emit(delta.duckdb_sql(store, extension.resolve()), "text")
    return 0


def _delta_table_lines(tables: dict[str, Any]) -> list[str]:
    lines = [f"  {'table':<16}  {'version':>8}  {'generation':>10}"]
    for name, head in tables.items():
        if head is None:
            lines.append(f"  {name:<16}  {'-':>8}  {'-':>10}")
        else:
            lines.append(f"  {name:<16}  {head['version']:>8,}  {head['generation']:>10,}")
    return lines


def _cmd_compact(args: argparse.Namespace) -> int:
    merged = _open(args.store).compact(args.table, min_rows=args.min_rows)
    text = ("compact: nothing to merge" if not any(merged.values()) else
            "compact: merged " + ", ".join(f"{n:,} partition(s) of {t}"
                                           for t, n in merged.items() if n))
    _report(args, merged, text)
    return 0


# ---- parser --------------------------------------------------------------------------------

_FORMAT_HELP = "text on a terminal, json when piped"


def _sub(sub: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help=help_text, description=help_text, formatter_class=_Formatter)
    p.set_defaults(parser=p)
    return p


def _register_recall_audits(audit_sub: Any) -> None:
    """``memframe audit recalls`` and ``memframe audit trust``."""
    p = _sub(audit_sub, "recalls", "recall coverage: receipts, hits, never-recalled capsules")
    _store_arg(p)
    _format_arg(p, ("text", "json", "html"))
    p.add_argument("--since", default=None, metavar="T",
                   help="first instant or day, inclusive (default: the first receipt or miss)")
    p.add_argument("--until", default=None, metavar="T",
                   help="last instant or day, exclusive (default: now)")
    p.add_argument("--project-prefix", default=None, metavar="P",
                   help="only receipts and capsules of projects under P (default: all)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the report to FILE (default: print to stdout)")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_audit_recalls)
    p = _sub(audit_sub, "trust", "recalled capsules on drifted, missing or weak evidence")
    _store_arg(p)
    _format_arg(p, ("text", "json", "html"))
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the report to FILE (default: print to stdout)")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_audit_trust)


def _register_diff(sub: Any) -> None:
    """``memframe diff``."""
    p = _sub(sub, "diff", "what changed in a store between two generations or instants")
    _store_arg(p)
    p.add_argument("--since", required=True, metavar="G|T",
                   help="a generation number or an instant (ISO 8601); required")
    p.add_argument("--until", default=None, metavar="G|T",
                   help="a generation number or an instant (default: the newest generation)")
    _format_arg(p, ("text", "json", "html"))
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the report to FILE (default: print to stdout)")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_diff)


def _register_explain(sub: Any) -> None:
    """``memframe explain``."""
    p = _sub(sub, "explain", "why a capsule is, or is not, in each list of the digest")
    p.add_argument("store", metavar="STORE", help="the store directory")
    p.add_argument("capsule_id", metavar="CAP-ID",
                   help="the capsule to explain (cap-<n>; `memframe digest` lists ids)")
    p.add_argument("--project-prefix", default=None, metavar="P",
                   help="the digest's fence: P and P/... (default: the whole store)")
    p.add_argument("--headlines", type=_headlines, default=10, metavar="N",
                   help="the digest's list cap")
    _format_arg(p, ("text", "json", "html"))
    _quiet_arg(p)
    p.set_defaults(func=_cmd_explain)


def _store_arg(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    if required:
        p.add_argument("store", metavar="STORE",
                       help="the store directory, or its URL (s3://, gs://, az://)")
    else:
        p.add_argument("store", nargs="?", metavar="STORE",
                       help="the store directory, or its URL (s3://, gs://, az://; default: "
                            "the bundled sample store)")


def _format_arg(p: argparse.ArgumentParser, choices: Sequence[str]) -> None:
    p.add_argument("--format", choices=tuple(choices), default=None,
                   help=f"output format (default: {_FORMAT_HELP})")


def _quiet_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no stage messages or progress bar on stderr")


def _as_of_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as-of", default=None, metavar="T",
                   help="a generation number or an ISO instant: the store as it was then; "
                        "`memframe info` lists the readable generations (default: the newest)")


def build_parser() -> argparse.ArgumentParser:
    """The ``memframe`` argument parser (also the source of the README's synopsis)."""
    parser = _Parser(
        prog="memframe",
        description="An AI agent's long-term memory store as dataframes. With no STORE, "
                    "commands read the bundled sample store. Results go to stdout (text on "
                    "a terminal, JSON when piped); messages go to stderr.",
        formatter_class=_Formatter,
    )
    from memframe import __version__

    _ROOT[:] = [parser]
    parser.add_argument("--version", action="version", version=f"memframe {__version__}")
    parser.add_argument("--memory-limit", default=None, metavar="SIZE",
                        help="the most memory the paths that read a whole store may use "
                             "(e.g. 2GB, 512MiB; default: $MEMFRAME_MEMORY_LIMIT, else none). "
                             "They work in smaller chunks to fit, with the same answers, and "
                             "say what they need before starting when it cannot fit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    p = _sub(sub, "digest", "the session-start digest")
    p.add_argument("stores", nargs="*", metavar="STORE",
                   help="one or more store directories (default: the bundled sample store)")
    p.add_argument("--headlines", type=_headlines, default=10, metavar="N",
                   help="cap of every list; totals stay exact")
    p.add_argument("--project-prefix", default=None, metavar="P",
                   help="fence the capsule sections to P and P/... (default: the whole store)")
    _as_of_arg(p)
    _format_arg(p, ("text", "json", "html"))
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write one file per store (or per project) into DIR, in --format "
                        "(default: print to stdout)")
    p.add_argument("--known-hash", type=_known_hash, default=None, metavar="H",
                   help="the whole hash (64 hex characters, from --hash) of an earlier "
                        "digest: when it still matches, the answer is "
                        '{"unchanged":true,"hash":H} and no bodies are handed '
                        "(default: none, always hand the bodies)")
    p.add_argument("--hash", action="store_true",
                   help="print only the digest's whole hash (64 hex characters, the sha256 "
                        "of its JSON), the value --known-hash takes; for a hook")
    p.add_argument("--per-project", type=_positive, default=None, metavar="DEPTH",
                   help="one fenced digest per project subtree root at DEPTH (default: off)")
    p.add_argument("--engine", choices=("processes", "ray"), default="processes",
                   help="how several stores are digested in parallel")
    p.add_argument("--address", default=None, metavar="A",
                   help="Ray cluster address, with --engine ray (default: a local cluster)")
    p.add_argument("--changes", action="store_true",
                   help="add, under the digest, what changed since the previous session start "
                        "of the same scope (a digest diff; a start recorded with the newest "
                        "rows is this session's own and is passed over)")
    p.add_argument("--verify", choices=("incremental", "full"), default="incremental",
                   help="journal check: from the verified checkpoint, or the whole hash chain")
    p.add_argument("--no-advance", action="store_true",
                   help="read without writing: do not run the projections' cycle first (the "
                        "digest is the same; only the next call is slower). By default a "
                        "named STORE is advanced first, and a failure to do so is a note on "
                        "stderr")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_digest)

    p = _sub(sub, "fleet", "one row of figures per store, for many stores")
    p.add_argument("stores", nargs="+", metavar="STORE-OR-DIR",
                   help="stores, or directories (or s3://, gs://, az:// prefixes) whose "
                        "stores are listed")
    p.add_argument("--engine", choices=("local", "ray"), default="local",
                   help="read the stores in this process, or one Ray task per store")
    p.add_argument("--address", default=None, metavar="A",
                   help="Ray cluster address, with --engine ray (default: a running Ray, "
                        "else a local one)")
    p.add_argument("--now", type=_now, default=None, metavar="T",
                   help="the instant every store is read at and every age measured from "
                        "(default: the current time)")
    p.add_argument("--stale-days", type=_days, default=7.0, metavar="D",
                   help="flag a newest handoff older than D days")
    p.add_argument("--orphan-days", type=_days, default=1.0, metavar="D",
                   help="flag a session open for longer than D days")
    p.add_argument("--json", action="store_true",
                   help="print JSON also on a terminal (default: a table on a terminal, "
                        "JSON when piped)")
    p.add_argument("--html", default=None, metavar="FILE",
                   help="also write an HTML overview page to FILE (default: none)")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_fleet)

    p = _sub(sub, "sessions", "the newest sessions (one row per conversation)")
    _store_arg(p)
    p.add_argument("--limit", type=_positive, default=10, metavar="N",
                   help="newest sessions to list; total stays exact")
    p.add_argument("--known-hash", type=_known_hash, default=None, metavar="H",
                   help="the whole hash (64 hex characters, the JSON's \"hash\") of an "
                        "earlier answer: unchanged means no rows are handed "
                        "(default: none, always hand the rows)")
    _as_of_arg(p)
    _format_arg(p, ("text", "json"))
    p.set_defaults(func=_cmd_sessions)

    for name, func, help_text in (
        ("cycle", _cmd_cycle, "fold what was written since the watermark"),
        ("rebuild", _cmd_rebuild, "rebuild the projections from the canonical rows"),
    ):
        p = _sub(sub, name, help_text)
        p.add_argument("store", metavar="STORE",
                       help="the store directory (this command writes to it)")
        _format_arg(p, ("text", "json"))
        _quiet_arg(p)
        p.set_defaults(func=func)

    audit = _sub(sub, "audit", "offline audits")
    audit_sub = audit.add_subparsers(dest="audit", required=True, metavar="AUDIT",
                                     parser_class=_Parser)
    p = _sub(audit_sub, "misses", "the recall-miss audit")
    _store_arg(p)
    _format_arg(p, ("text", "json", "html"))
    p.add_argument("--since", default=None, metavar="T",
                   help="first instant or day, inclusive (default: the first miss)")
    p.add_argument("--until", default=None, metavar="T",
                   help="last instant or day, exclusive (default: now)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write the report to FILE (default: print to stdout)")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_audit_misses)
    _register_recall_audits(audit_sub)
    _register_diff(sub)
    _register_explain(sub)

    imp = _sub(sub, "import", "import another engine's store")
    imp_sub = imp.add_subparsers(dest="engine_name", required=True, metavar="ENGINE",
                                 parser_class=_Parser)
    p = _sub(imp_sub, "nmemory", "an nMEMORY SQLite file (schema v21 of release 0.3.0, or v20 of 0.2.x)")
    p.add_argument("sqlite", metavar="SQLITE", help="the nMEMORY SQLite file (read only)")
    p.add_argument("store", metavar="STORE", help="the memframe store to write (created if new)")
    _format_arg(p, ("text", "json"))
    _quiet_arg(p)
    p.set_defaults(func=_cmd_import_nmemory)

    p = _sub(sub, "synth", "write a deterministic synthetic store")
    p.add_argument("out", metavar="OUT", help="the new store's directory")
    p.add_argument("--capsules", type=_positive, default=3000, metavar="N",
                   help="how many capsules")
    p.add_argument("--seed", type=int, default=0, metavar="S",
                   help="the random seed (same seed, same store)")
    p.add_argument("--noise", action="store_true",
                   help="also write ids, hashes, numbers, code identifiers, mixed case and "
                        "diacritics into the content (default: off)")
    p.add_argument("--misses", type=_positive, default=None, metavar="M",
                   help="how many recall-miss rows to write (default: 4%% of N, at most 20,000)")
    p.add_argument("--receipts", type=_positive, default=None, metavar="R",
                   help="how many recall receipts to write (default: N/2)")
    p.add_argument("--end", default=None, metavar="T",
                   help="the instant the synthetic timeline ends at, ISO 8601 "
                        "(default: now, the time of synthesis)")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_synth)

    p = _sub(sub, "info", "a store's generation, readable history and tables")
    _store_arg(p)
    _as_of_arg(p)
    _format_arg(p, ("text", "json"))
    p.set_defaults(func=_cmd_info)

    p = _sub(sub, "vacuum", "remove files no generation in the retention window needs")
    _store_arg(p, required=True)
    p.add_argument("--retention-hours", type=float, default=168.0, metavar="H",
                   help="keep every generation of the last H hours readable (time travel)")
    p.add_argument("--allow-short-retention", action="store_true",
                   help="allow a retention shorter than the default: it ends time travel "
                        "to older generations and readers still on them")
    p.add_argument("--dry-run", action="store_true",
                   help="remove nothing; list what would go and which generations would "
                        "stop being readable")
    p.add_argument("--grace-seconds", type=float, default=60.0, metavar="S",
                   help="keep uncommitted files younger than this (a writer may be busy)")
    _format_arg(p, ("text", "json"))
    _quiet_arg(p)
    p.set_defaults(func=_cmd_vacuum)

    p = _sub(sub, "compact", "merge small partitions (no row changes)")
    _store_arg(p, required=True)
    p.add_argument("--table", default=None, metavar="NAME",
                   help="one canonical table (default: every table)")
    p.add_argument("--min-rows", type=_positive, default=65_536, metavar="N",
                   help="partitions smaller than this are merged (capsules: into "
                        "partitions of at most 16,384 rows, which an erasure rewrites whole)")
    _format_arg(p, ("text", "json"))
    _quiet_arg(p)
    p.set_defaults(func=_cmd_compact)

    p = _sub(sub, "push", "publish the store on object storage (or a file:// copy)")
    _store_arg(p, required=True)
    p.add_argument("url", metavar="URL",
                   help="where to publish it: s3://bucket/prefix, gs://..., az://..., "
                        "file:///path (credentials from the AWS_* environment variables)")
    _format_arg(p, ("text", "json"))
    _quiet_arg(p)
    p.set_defaults(func=_cmd_push)

    delta = _sub(sub, "delta", "each canonical table as a Delta Lake table")
    delta_sub = delta.add_subparsers(dest="delta", required=True, metavar="ACTION",
                                     parser_class=_Parser)
    p = _sub(delta_sub, "sync", "keep Delta logs beside the tables, and write what is missing")
    _store_arg(p, required=True)
    _format_arg(p, ("text", "json"))
    _quiet_arg(p)
    p.add_argument("--rebuild", action="store_true",
                   help="discard every table's Delta log and start them again at the newest "
                        "generation (recovers logs ahead of _log/ or damaged by hand)")
    p.set_defaults(func=_cmd_delta_sync)
    p = _sub(delta_sub, "status", "whether the Delta logs are kept and how far they reach")
    _store_arg(p, required=True)
    _format_arg(p, ("text", "json"))
    p.set_defaults(func=_cmd_delta_status)
    p = _sub(delta_sub, "duckdb", "the SQL that reads every table in DuckDB offline: load "
                                   "the delta extension from its file, one view per table")
    _store_arg(p, required=True)
    p.add_argument("--extension", default=None, metavar="FILE",
                   help="the delta.duckdb_extension file (default: the one the "
                        "duckdb-ext-delta package installed into this Python)")
    p.set_defaults(func=_cmd_delta_duckdb)
    return parser


def _commands(parser: argparse.ArgumentParser, prefix: str) -> list[tuple[str, Any]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            out = []
            for name, child in action.choices.items():
                out += _commands(child, f"{prefix} {name}")
            return out
    return [(prefix, parser)]


def _usage_of(prefix: str, parser: argparse.ArgumentParser) -> str:
    parts = [prefix]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings:
            meta = action.metavar or action.dest
            if isinstance(meta, tuple):  # one name per value of a fixed count
                meta = " ".join(meta)
            parts.append(f"[{meta}]" if action.nargs == "?"
                         else f"[{meta} ...]" if action.nargs == "*" else meta)
            continue
        flag = action.option_strings[-1]
        if action.nargs == 0:
            parts.append(f"[{flag}]")
        elif action.choices:
            parts.append(f"[{flag} {'|'.join(action.choices)}]")
        else:
            parts.append(f"[{flag} {action.metavar or action.dest.upper()}]")
    return " ".join(parts)


def synopsis() -> str:
    """One usage line per command, generated from the parser (the README shows it).

    Examples:
        >>> synopsis().splitlines()[0].startswith("memframe digest [STORE ...] [--headlines N]")
        True
    """
    return "\n".join(_usage_of(prefix, p) for prefix, p in _commands(build_parser(), "memframe"))


# the API's words -> the command line's: parameters are options here, and a store is
# made with a command
_CLI_WORDS = (
    (re.compile(r"\b(grace_seconds|min_rows|known_hash|since|until|headlines|limit)="),
     lambda m: f"--{m.group(1).replace('_', '-')} "),
    (re.compile(r"^(since|until) \("), lambda m: f"--{m.group(1)} ("),
    (re.compile(r"is after until \("), lambda m: "is after --until ("),
    (re.compile(r"create one with mf\.Store\.create\(path\) or `memframe synth PATH`"),
     lambda m: "make one with `memframe synth PATH` or `memframe import nmemory SQLITE PATH`"),
)


def _cli_message(command: str, exc: Exception) -> str:
    """An error's message in the command line's words: options for parameters, commands
    for Python calls (the digest's fail-closed prefix is the wire protocol's).

    Examples:
        >>> _cli_message("vacuum", ValueError("grace_seconds=0.0: give a positive number"))
        'memframe vacuum: --grace-seconds 0.0: give a positive number'
        >>> _cli_message("digest", ValueError("memory_digest failed: journal: gap"))
        'memframe digest: cannot compute the digest: journal: gap'
    """
    text = str(exc)
    prefix = "memory_digest failed: "
    if text.startswith(prefix):
        text = "cannot compute the digest: " + text[len(prefix):]
    for pattern, words in _CLI_WORDS:
        text = pattern.sub(words, text)
    return f"memframe {command}: {text}"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    from memframe._render.terminal import terminal_text

    parser = build_parser()
    _STATUS.__init__()  # type: ignore[misc]  # the whole command is timed from here
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command's own parser: its usage, its options to suggest
            args.parser.error(f"unrecognized arguments: {' '.join(extra)}")
        from memframe.errors import MemframeError

        _STATUS.start(args)
        ok = False
        try:
            if args.memory_limit is not None:  # every path of this command reads it
                from memframe.budget import ENV, parse_memory

                os.environ[ENV] = str(parse_memory(args.memory_limit, what="--memory-limit"))
            from memframe.progress import showing

            with showing(_progress(args)):  # the long paths' bars, on a terminal
                code = int(args.func(args) or 0)
            ok = code == 0
            return code
        except _UsageError as exc:
            _STATUS.erase()
            args.parser.usage_error(str(exc))
            return 2
        except MemframeError as exc:
            _STATUS.clear()
            print(_fit_message(terminal_text(_cli_message(args.command, exc))),
                  file=sys.stderr)
            return 1
        except BrokenPipeError:
            return 0
        except OSError as exc:  # the file system refused something outside the store
            _STATUS.clear()
            where = f"{exc.filename}: " if exc.filename else ""
            print(_fit_message(terminal_text(f"memframe {args.command}: {where}"
                                             f"{exc.strerror or exc}; nothing more was done")),
                  file=sys.stderr)
            return 1
        finally:
            _STATUS.finish(ok)
    except KeyboardInterrupt:
        _STATUS.clear()
        print("\nmemframe: interrupted", file=sys.stderr)
        return 130
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
