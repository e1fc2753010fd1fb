"""The ``memframe`` command: a thin shell over the public API (DESIGN.md section 6).

Exit codes: 0 success, 2 usage error, 1 a ``MemframeError`` (message on stderr, no
traceback). Results go to stdout unless ``--out`` names a file or folder; progress bars
and diagnostics go to stderr. Each subcommand imports only what it needs, so that
``memframe digest`` on the sample store starts quickly.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser"]


class _UsageError(Exception):
    """A command line that cannot be run as given (exit code 2, like argparse's own)."""


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


def _progress(args: argparse.Namespace) -> bool:
    return not getattr(args, "quiet", False) and sys.stderr.isatty()


# ---- digest ------------------------------------------------------------------------------

def _digest_text(d: Any) -> str:
    body = d.to_dict()
    lines = [f"memframe digest  generation {d.generation}  hash {d.hash[:12]}"]
    if d.unchanged:
        lines.append("unchanged (the known hash matches): no bodies")
        return "\n".join(lines)
    lines.append(f"total {body['total']} capsules in {len(body['by_project'])} project(s)")
    for row in body["by_project"]:
        lines.append(f"  {row['project_id']:<32} count {row['count']:>7}  live {row['live']:>7}")
    for key, title in (("handoff", "handoffs"), ("newest", "newest"),
                       ("most_recalled", "most recalled")):
        rows = body.get(key) or []
        if not rows:
            continue
        total = body.get(f"{key}_total", len(rows))
        lines.append(f"{title} ({len(rows)} of {total}):")
        for r in rows:
            extra = f"  x{r['recall_count']}" if "recall_count" in r else ""
            lines.append(f"  {r['id']:<10} {r['project_id']:<20} {r['headline']}{extra}")
    lines.append(f"relations {body['relations']}  open sessions {body['open_sessions']}  "
                 f"audit events {body['audit_events']}  recall misses {body['recall_misses']}")
    dag = body["dag"]
    if dag["status"] == "ok":
        lines.append(f"dag ok: ready {dag['ready_total']}, blocked {dag['blocked_total']}, "
                     f"done {dag['done_total']}")
    else:
        lines.append(f"dag CYCLE: {' -> '.join(dag['cycle'])} (entangled {dag['entangled_total']})")
    if "mission" in body:
        m = body["mission"]
        lines.append(f"mission {m['status']}: " + (
            ", ".join(f"{r['id']} ({r['children']} children)" for r in m["roots"])
            if m["status"] == "ok" else " -> ".join(m["cycle"])))
    tiers, journal = body["tiers"], body["journal"]
    lines.append(f"tiers active {tiers['active']} archived {tiers['archived']} "
                 f"quarantined {tiers['quarantined']}  journal {journal['chain']}  "
                 f"archive candidates {body['archive_candidates']}")
    return "\n".join(lines)


def _render_digest(d: Any, fmt: str) -> str:
    if fmt == "json":
        return d.to_json()
    if fmt == "html":
        return "<!doctype html><meta charset='utf-8'><title>memframe digest</title>" + d._repr_html_()
    return _digest_text(d)


def _cmd_digest(args: argparse.Namespace) -> int:
    import memframe.digest as digest_mod

    kwargs: dict[str, Any] = {"headlines": args.headlines, "project_prefix": args.project_prefix}
    stores = args.stores or [str(_default_store())]
    if args.per_project is not None:
        if len(stores) != 1:
            raise _UsageError("--per-project takes exactly one STORE")
        store = _open(stores[0], as_of=args.as_of)
        kwargs.pop("project_prefix")
        digests = digest_mod.per_project_digests(store, args.per_project, **kwargs)
        if args.out is None:
            for root, d in digests.items():
                _emit(json.dumps({"project": root, "digest": json.loads(d.to_json())},
                                 ensure_ascii=False, separators=(",", ":")), None)
        else:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            for root, d in digests.items():
                name = root.replace("/", "__") + "." + ("json" if args.format == "json" else args.format)
                (out / name).write_text(_render_digest(d, args.format) + "\n", encoding="utf-8")
            print(f"wrote {len(digests)} digest(s) to {out}", file=sys.stderr)
        return 0
    if len(stores) == 1 and args.out is None:
        d = digest_mod.digest(_open(stores[0], as_of=args.as_of), **kwargs)
        _emit(_render_digest(d, args.format), None)
        return 0
    if args.as_of is not None:
        raise _UsageError("--as-of applies to one STORE at a time")
    if args.out is None:
        raise _UsageError("several stores need --out DIR (one JSON file per store)")
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
    from memframe.projections.commands import sessions_command

    store = _open(args.store, as_of=args.as_of)
    body = sessions_command(store, known_hash=args.known_hash, limit=args.limit)
    _emit(json.dumps(body, ensure_ascii=False, separators=(",", ":")), None)
    return 0


def _writable(path: str | None, command: str) -> str:
    """Write commands need a STORE: the bundled sample store is shared, read-only data."""
    if path is None:
        raise _UsageError(
            f"this command writes to the store; name a STORE (to try it on the sample, copy "
            f"it first: cp -r {_default_store()} my-store)"
        )
    return path


def _cmd_cycle(args: argparse.Namespace) -> int:
    from memframe.projections.commands import cycle_command

    body = cycle_command(_open(_writable(args.store, "cycle")))
    _emit(json.dumps(body, separators=(",", ":")), None)
    return 0


def _cmd_rebuild(args: argparse.Namespace) -> int:
    from memframe.projections.commands import rebuild_command

    body = rebuild_command(_open(_writable(args.store, "rebuild")))
    _emit(json.dumps(body, separators=(",", ":")), None)
    return 0


# ---- audits, imports, synthesis, maintenance -----------------------------------------------

def _cmd_audit_misses(args: argparse.Namespace) -> int:
    from memframe.audit import recall_misses

    audit = recall_misses(_open(args.store), since=args.since, until=args.until,
                          progress=_progress(args))
    if args.format == "json":
        text = audit.to_json()
    elif args.format == "html":
        text = audit.to_html()
    else:
        text = audit.to_text()
    _emit(text, args.out)
    return 0


def _cmd_import_nmemory(args: argparse.Namespace) -> int:
    from memframe.importers import import_nmemory

    report = import_nmemory(args.sqlite, args.store, progress=_progress(args))
    _emit(str(report), None)
    return 0


def _cmd_synth(args: argparse.Namespace) -> int:
    from memframe.synth import synthesize

    store = synthesize(args.out, capsules=args.capsules, seed=args.seed, progress=_progress(args),
                       noise=args.noise, misses=args.misses)
    print(f"wrote a synthetic store of {store.row_count('capsules'):,} capsules to {args.out}",
          file=sys.stderr)
    return 0


def _cmd_info(args: argparse.Namespace) -> int:
    store = _open(args.store, as_of=args.as_of)
    if args.format == "json":
        view = store.pinned()
        from memframe.schema import CANONICAL_TABLES

        info = {
            "path": str(view.path),
            "generation": view.generation,
            "committed_at": view.committed_at,
            "tables": {n: {"rows": view.row_count(n), "partitions": len(view.files(n))}
                       for n in CANONICAL_TABLES},
            "watermarks": dict(view.watermarks),
        }
        _emit(json.dumps(info, indent=2), None)
    else:
        _emit(repr(store.pinned()), None)
    return 0


def _cmd_vacuum(args: argparse.Namespace) -> int:
    removed = _open(args.store).vacuum(grace_seconds=args.grace_seconds)
    _emit(json.dumps(removed), None)
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    merged = _open(args.store).compact(args.table, min_rows=args.min_rows)
    _emit(json.dumps(merged), None)
    return 0


# ---- parser --------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memframe",
        description="An AI agent's long-term memory store as dataframes. With no STORE, "
                    "commands read the bundled sample store.",
    )
    from memframe import __version__

    parser.add_argument("--version", action="version", version=f"memframe {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("digest", help="the session-start digest (spec 001)")
    p.add_argument("stores", nargs="*", metavar="STORE")
    p.add_argument("--headlines", type=_headlines, default=10, metavar="N",
                   help="cap of every list (default 10; totals stay exact)")
    p.add_argument("--project-prefix", default=None, metavar="P",
                   help="fence the capsule sections to P and P/...")
    p.add_argument("--as-of", default=None, metavar="T",
                   help="a generation number or an ISO instant: the digest as it was")
    p.add_argument("--format", choices=("json", "text", "html"), default="json")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write one file per store (or per project) into DIR")
    p.add_argument("--per-project", type=_positive, default=None, metavar="DEPTH",
                   help="one fenced digest per project subtree root at DEPTH")
    p.add_argument("--engine", choices=("processes", "ray"), default="processes",
                   help="how several stores are digested in parallel")
    p.add_argument("--address", default=None, help="Ray cluster address (with --engine ray)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cmd_digest)

    p = sub.add_parser("sessions", help="the session projection (spec 000)")
    p.add_argument("store", nargs="?", metavar="STORE")
    p.add_argument("--limit", type=_positive, default=10)
    p.add_argument("--known-hash", default=None, metavar="H")
    p.add_argument("--as-of", default=None, metavar="T")
    p.set_defaults(func=_cmd_sessions)

    for name, func, help_text in (
        ("cycle", _cmd_cycle, "fold what was written since the watermark"),
        ("rebuild", _cmd_rebuild, "rebuild the projections from the canonical rows"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("store", nargs="?", metavar="STORE")
        p.set_defaults(func=func)

    audit = sub.add_parser("audit", help="offline audits")
    audit_sub = audit.add_subparsers(dest="audit", required=True, metavar="AUDIT")
    p = audit_sub.add_parser("misses", help="the recall-miss audit")
    p.add_argument("store", nargs="?", metavar="STORE")
    p.add_argument("--format", choices=("text", "json", "html"), default="text")
    p.add_argument("--since", default=None)
    p.add_argument("--until", default=None)
    p.add_argument("--out", default=None, metavar="FILE")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.set_defaults(func=_cmd_audit_misses)

    imp = sub.add_parser("import", help="import another engine's store")
    imp_sub = imp.add_subparsers(dest="engine_name", required=True, metavar="ENGINE")
    p = imp_sub.add_parser("nmemory", help="an nMEMORY SQLite file (schema v20)")
    p.add_argument("sqlite", metavar="SQLITE")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_import_nmemory)

    p = sub.add_parser("synth", help="write a deterministic synthetic store")
    p.add_argument("out", metavar="OUT")
    p.add_argument("--capsules", type=_positive, default=3000, metavar="N")
    p.add_argument("--seed", type=int, default=0, metavar="S")
    p.add_argument("--noise", action="store_true",
                   help="also write ids, hashes, numbers, code identifiers, mixed case and "
                        "diacritics into the content")
    p.add_argument("--misses", type=_positive, default=None, metavar="M",
                   help="how many recall-miss rows to write (default: 4%% of N, at most 20,000)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=_cmd_synth)

    p = sub.add_parser("info", help="a store's generation and tables")
    p.add_argument("store", nargs="?", metavar="STORE")
    p.add_argument("--as-of", default=None, metavar="T")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("vacuum", help="remove files no generation needs")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--grace-seconds", type=float, default=60.0)
    p.set_defaults(func=_cmd_vacuum)

    p = sub.add_parser("compact", help="merge small partitions (no row changes)")
    p.add_argument("store", metavar="STORE")
    p.add_argument("--table", default=None)
    p.add_argument("--min-rows", type=_positive, default=65_536)
    p.set_defaults(func=_cmd_compact)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
