"""The ``memframe`` command: a thin shell over the public API (DESIGN.md section 6).

Exit codes: 0 success, 2 usage error, 1 a ``MemframeError`` (message on stderr, no
traceback), 130 interrupted (Ctrl-C). One output convention for every command: results go
to stdout, readable text on a terminal and JSON when piped or with ``--format json``;
stage messages and progress bars go to stderr, on a terminal only (``--quiet`` silences
them). Each subcommand imports only what it needs, so that ``memframe digest`` on the
sample store starts quickly.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser", "synopsis"]


class _UsageError(Exception):
    """A command line that cannot be run as given (exit code 2, like argparse's own)."""


class _Formatter(argparse.HelpFormatter):
    """Help that shows every option's default (when it has one worth showing)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("%(default)" not in text and action.option_strings and default is not None
                and default is not False and default is not argparse.SUPPRESS):
            text += " (default: %(default)s)"
        return text


class _Parser(argparse.ArgumentParser):
    """argparse, plus a suggestion when a command name is mistyped."""

    def error(self, message: str) -> Any:  # type: ignore[override]
        match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if match:
            choices = [c.strip(" '") for c in match.group(2).split(",")]
            near = difflib.get_close_matches(match.group(1), choices, n=1, cutoff=0.5)
            if near:
                message += f"; did you mean '{near[0]}'?"
        return super().error(message)


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
    return n


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


def _open(path: str | None, *, as_of: str | None = None) -> Any:
    from memframe.store import Store

    store = Store.open(path if path is not None else _default_store())
    if as_of is None:
        return store
    if as_of.isdigit():
        return store.at(int(as_of))
    return store.as_of(as_of)


def _emit(text: str, out: str | None) -> None:
    if out is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)


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


def _format(args: argparse.Namespace, *, file_out: bool = False) -> str:
    """The output format: as asked, else readable text on a terminal and JSON otherwise."""
    if getattr(args, "format", None):
        return str(args.format)
    return "text" if _terminal() and not file_out else "json"


def _json(body: Any) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


class _Stage:
    """``memframe <command>: <what>...`` on stderr, then ``done in N.Ns`` (terminal only)."""

    def __init__(self, args: argparse.Namespace, what: str):
        self.show = _progress(args)
        self.what = f"memframe {args.command}: {what}"
        self.started = 0.0

    def __enter__(self) -> _Stage:
        self.started = time.perf_counter()
        if self.show:
            print(f"{self.what}...", end="", file=sys.stderr, flush=True)
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if self.show:
            took = time.perf_counter() - self.started
            print(" done" if kind is None else " stopped", f"in {took:.1f}s", file=sys.stderr)


# ---- digest ------------------------------------------------------------------------------

def _render_digest(d: Any, fmt: str) -> str:
    if fmt == "json":
        return str(d.to_json())
    if fmt == "html":
        return str(d.to_html())
    return str(d.to_text())


def _advance(store: Any, args: argparse.Namespace) -> None:
    """Run the projections' cycle (the digest's state included) when the store is writable.

    The digest is exact without it; advancing keeps the next call warm. A frozen view
    (``--as-of``), the bundled sample store, ``--no-advance`` or a store this process
    cannot write are read as they are.
    """
    from memframe.errors import ConcurrentCommitError, ReadOnlyStoreError, StorageError
    from memframe.store import Store

    if args.no_advance or not args.stores or not isinstance(store, Store):
        return
    try:
        store.memory.run_cycle()
    except (OSError, ReadOnlyStoreError, ConcurrentCommitError, StorageError):
        pass  # read-only here: the digest still answers exactly


def _cmd_digest(args: argparse.Namespace) -> int:
    import memframe.digest as digest_mod

    kwargs: dict[str, Any] = {"headlines": args.headlines, "project_prefix": args.project_prefix,
                              "verify": args.verify}
    stores = args.stores or [str(_default_store())]
    _check_out(args.out, directory=True)
    if args.per_project is not None:
        if len(stores) != 1:
            raise _UsageError("--per-project takes exactly one STORE")
        store = _open(stores[0], as_of=args.as_of)
        _advance(store, args)
        kwargs.pop("project_prefix")
        with _Stage(args, f"per-project digests of {store.path} at depth {args.per_project}"):
            digests = digest_mod.per_project_digests(store, args.per_project, **kwargs)
        if args.out is None:
            fmt = _format(args)
            for root, d in digests.items():
                if fmt == "json":
                    _emit(_json({"project": root, "digest": json.loads(d.to_json())}), None)
                else:
                    _emit(f"== project {root}\n" + _render_digest(d, fmt), None)
        else:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            for root, d in digests.items():
                fmt = _format(args, file_out=True)
                name = f"{digest_mod.batch.project_file_stem(root)}.{fmt}"
                (out / name).write_text(_render_digest(d, fmt) + "\n", encoding="utf-8")
            print(f"wrote {len(digests)} digest(s) to {out}", file=sys.stderr)
        return 0
    if len(stores) == 1 and args.out is None:
        store = _open(stores[0], as_of=args.as_of)
        _advance(store, args)
        with _Stage(args, f"digest of {store.path} at generation {store.generation}"):
            d = digest_mod.digest(store, **kwargs)
        _emit(_render_digest(d, _format(args)), None)
        return 0
    if args.as_of is not None:
        raise _UsageError("--as-of applies to one STORE at a time")
    if args.out is None:
        raise _UsageError("several stores need --out DIR (one JSON file per store)")
    if _progress(args):
        print(f"memframe digest: {len(stores)} stores into {args.out}", file=sys.stderr)
    if getattr(args, "engine", "processes") == "ray":
        from memframe.distributed import digest_many as ray_digest_many

        report = ray_digest_many(stores, engine="ray", address=args.address, out_dir=args.out,
                                 progress=_progress(args), **kwargs)
    else:
        report = digest_mod.digest_many(stores, out_dir=args.out, progress=_progress(args),
                                        **kwargs)
    for path, error in report.failures.items():
        print(f"memframe digest: {path}: {error}", file=sys.stderr)
    print(f"digested {len(report.digests)} store(s) into {args.out}; "
          f"{len(report.failures)} failed", file=sys.stderr)
    return 1 if report.failures else 0


# ---- projections -------------------------------------------------------------------------

def _cmd_sessions(args: argparse.Namespace) -> int:
    import polars as pl

    from memframe.text import rfc3339

    store = _open(args.store, as_of=args.as_of)
    page = store.memory.session_digest(limit=args.limit, known_hash=args.known_hash)
    if _format(args) == "text":
        head = (f"{page.total:,} sessions, {page.rows_visited:,} rows read, "
                f"hash {page.hash[:12]}" if not page.unchanged
                else f"unchanged (hash {page.hash[:12]})")
        _emit("\n".join([head, *page.rows.get_column("line").to_list()]), None)
        return 0
    rows = page.rows.drop("line").with_columns(
        rfc3339(pl.col(c)).alias(c) for c, d in page.rows.schema.items()
        if isinstance(d, pl.Datetime))
    _emit(_json({"hash": page.hash, "unchanged": page.unchanged,
                 "rows_visited": page.rows_visited, "total": page.total,
                 "sessions": rows.to_dicts()}), None)
    return 0


def _report(args: argparse.Namespace, body: dict[str, Any], text: str) -> None:
    _emit(text if _format(args) == "text" else _json(body), None)


def _writable(path: str | None, command: str) -> str:
    """Write commands need a STORE: the bundled sample store is shared, read-only data."""
    if path is None:
        raise _UsageError(
            f"this command writes to the store; name a STORE (to try it on the sample, copy "
            f"it first: cp -r {_default_store()} my-store)"
        )
    return path


def _cycle_text(verb: str, body: dict[str, Any]) -> str:
    landed = (f"generation {body['generation']}" if body.get("generation") is not None
              else "nothing to commit")
    parts = body.get("projections") or {"session": body}
    session = parts.get("session", body)
    others = sum(p["rows_written"] for name, p in parts.items() if name != "session")
    extra = f" and {others:,} derived row(s)" if others else ""
    return (f"{verb}: folded {body['rows_folded']:,} rows, wrote {session['rows_written']:,} "
            f"session rows{extra} ({body['rows_visited']:,} rows read); watermark "
            f"{body['watermark']:,}; {landed}")


def _cmd_cycle(args: argparse.Namespace) -> int:
    store = _open(_writable(args.store, "cycle"))
    with _Stage(args, "folding what was written since the watermark"):
        body = store.memory.run_cycle().to_dict()
    _report(args, body, _cycle_text("cycle", body))
    return 0


def _cmd_rebuild(args: argparse.Namespace) -> int:
    store = _open(_writable(args.store, "rebuild"))
    with _Stage(args, "rebuilding the projections from the canonical rows"):
        body = store.memory.rebuild_projections().to_dict()
    _report(args, body, _cycle_text("rebuild", body))
    return 0


# ---- audits, imports, synthesis, maintenance -----------------------------------------------

def _cmd_audit_misses(args: argparse.Namespace) -> int:
    from memframe.audit import recall_misses

    _check_out(args.out, directory=False)
    store = _open(args.store)
    with _Stage(args, f"recall-miss audit of {store.path}"):
        audit = recall_misses(store, since=args.since, until=args.until,
                              progress=_progress(args))
    fmt = _format(args, file_out=args.out is not None)
    if fmt == "json":
        text = audit.to_json()
    elif fmt == "html":
        text = audit.to_html()
    else:
        text = audit.to_text()
    _emit(text, args.out)
    return 0


def _cmd_import_nmemory(args: argparse.Namespace) -> int:
    from memframe.importers import import_nmemory

    if _progress(args):
        print(f"memframe import: reading {args.sqlite} into {args.store}", file=sys.stderr)
    report = import_nmemory(args.sqlite, args.store, progress=_progress(args))
    if _format(args) == "text":
        _emit(str(report), None)
    else:
        _emit(_json({"mode": report.mode, "source": str(report.source),
                     "store": str(report.store), "generation": report.generation,
                     "rows_written": report.rows_written, "source_rows": report.source_rows,
                     "read": report.read, "added": report.added, "skipped": report.skipped,
                     "erased": report.erased, "notes": list(report.notes)}), None)
    return 0


def _cmd_synth(args: argparse.Namespace) -> int:
    from memframe.synth import synthesize

    store = synthesize(args.out, capsules=args.capsules, seed=args.seed, progress=_progress(args),
                       noise=args.noise, misses=args.misses)
    print(f"wrote a synthetic store of {store.row_count('capsules'):,} capsules to {args.out}",
          file=sys.stderr)
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


def _cmd_info(args: argparse.Namespace) -> int:
    from memframe.schema import CANONICAL_TABLES

    store = _open(args.store)
    view = _open(args.store, as_of=args.as_of).pinned()
    newest = store.generation
    oldest, whole = _readable(store)
    if _format(args) == "json":
        info = {
            "path": str(view.path),
            "generation": view.generation,
            "committed_at": view.committed_at,
            "newest_generation": newest,
            "readable_generations": [oldest, newest] if newest else [],
            "tables": {n: {"rows": view.row_count(n), "partitions": len(view.files(n))}
                       for n in CANONICAL_TABLES},
            "watermarks": dict(view.watermarks),
        }
        _emit(json.dumps(info, indent=2), None)
        return 0
    lines = [repr(view)]
    if newest == 0:
        lines.append("an empty store (no generation yet)")
    elif whole:
        lines.append(f"readable generations: 1..{newest} (the whole history: --as-of and "
                     f"store.at(g) reach every one)")
    else:
        lines.append(f"readable generations: {oldest}..{newest} (older ones lost files to "
                     f"compaction and vacuum; --as-of and store.at(g) reach back to {oldest})")
    _emit("\n".join(lines), None)
    return 0


def _cmd_vacuum(args: argparse.Namespace) -> int:
    report = _open(args.store).vacuum(
        retention_hours=args.retention_hours, allow_short_retention=args.allow_short_retention,
        dry_run=args.dry_run, grace_seconds=args.grace_seconds)
    verb = "would remove" if report["dry_run"] else "removed"
    lines = [f"vacuum{' --dry-run' if report['dry_run'] else ''}: {verb} "
             f"{report['partitions']:,} partition file(s) and {report['temporary']:,} "
             f"temporary file(s) (retention {report['retention_hours']:g} h)"]
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
    return sub.add_parser(name, help=help_text, description=help_text, formatter_class=_Formatter)


def _store_arg(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    if required:
        p.add_argument("store", metavar="STORE", help="the store directory")
    else:
        p.add_argument("store", nargs="?", metavar="STORE",
                       help="the store directory (default: the bundled sample store)")


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

    parser.add_argument("--version", action="version", version=f"memframe {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=_Parser)

    p = _sub(sub, "digest", "the session-start digest (spec 001)")
    p.add_argument("stores", nargs="*", metavar="STORE",
                   help="one or more store directories (default: the bundled sample store)")
    p.add_argument("--headlines", type=_headlines, default=10, metavar="N",
                   help="cap of every list; totals stay exact")
    p.add_argument("--project-prefix", default=None, metavar="P",
                   help="fence the capsule sections to P and P/... (default: the whole store)")
    _as_of_arg(p)
    _format_arg(p, ("text", "json", "html"))
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write one file per store (or per project) into DIR "
                        "(default: print to stdout)")
    p.add_argument("--per-project", type=_positive, default=None, metavar="DEPTH",
                   help="one fenced digest per project subtree root at DEPTH (default: off)")
    p.add_argument("--engine", choices=("processes", "ray"), default="processes",
                   help="how several stores are digested in parallel")
    p.add_argument("--address", default=None, metavar="A",
                   help="Ray cluster address, with --engine ray (default: a local cluster)")
    p.add_argument("--verify", choices=("incremental", "full"), default="incremental",
                   help="journal check: from the verified checkpoint, or the whole hash chain "
                        "(default: incremental)")
    p.add_argument("--no-advance", action="store_true",
                   help="do not run the projections' cycle first; read the store as it is "
                        "(default: advance when the store is writable)")
    _quiet_arg(p)
    p.set_defaults(func=_cmd_digest)

    p = _sub(sub, "sessions", "the session projection's digest (spec 000)")
    _store_arg(p)
    p.add_argument("--limit", type=_positive, default=10, metavar="N",
                   help="newest sessions to list; total stays exact")
    p.add_argument("--known-hash", default=None, metavar="H",
                   help="the hash of an earlier answer: unchanged means no rows are handed "
                        "(default: none, always hand the rows)")
    _as_of_arg(p)
    _format_arg(p, ("text", "json"))
    p.set_defaults(func=_cmd_sessions)

    for name, func, help_text in (
        ("cycle", _cmd_cycle, "fold what was written since the watermark"),
        ("rebuild", _cmd_rebuild, "rebuild the projections from the canonical rows"),
    ):
        p = _sub(sub, name, help_text)
        p.add_argument("store", nargs="?", metavar="STORE",
                       help="the store directory (required: this command writes)")
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

    imp = _sub(sub, "import", "import another engine's store")
    imp_sub = imp.add_subparsers(dest="engine_name", required=True, metavar="ENGINE",
                                 parser_class=_Parser)
    p = _sub(imp_sub, "nmemory", "an nMEMORY SQLite file (schema v20)")
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
    p.set_defaults(func=_cmd_vacuum)

    p = _sub(sub, "compact", "merge small partitions (no row changes)")
    _store_arg(p, required=True)
    p.add_argument("--table", default=None, metavar="NAME",
                   help="one canonical table (default: every table)")
    p.add_argument("--min-rows", type=_positive, default=65_536, metavar="N",
                   help="partitions smaller than this are merged")
    _format_arg(p, ("text", "json"))
    p.set_defaults(func=_cmd_compact)
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
            parts.append({"?": f"[{meta}]", "*": f"[{meta} ...]"}.get(action.nargs, meta))
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        from memframe.errors import MemframeError

        try:
            return int(args.func(args) or 0)
        except _UsageError as exc:
            print(f"usage error: memframe {args.command}: {exc}", file=sys.stderr)
            return 2
        except MemframeError as exc:
            print(f"memframe {args.command}: {exc}", file=sys.stderr)
            return 1
        except BrokenPipeError:
            return 0
        except OSError as exc:  # the file system refused something outside the store
            where = f"{exc.filename}: " if exc.filename else ""
            print(f"memframe {args.command}: {where}{exc.strerror or exc}; nothing more was "
                  f"done", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        print("\nmemframe: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
