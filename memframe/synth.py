"""Deterministic synthetic stores: sample data, tests and benchmarks.

`synthesize` writes a store with the shape of a real agent's memory: a project tree,
bursty conversations over weeks, bracket sessions with handoffs (some left open),
``ACTIVE(<thread>):`` thread handoffs chained with ``supersedes``, supersede chains,
tombstones (some redacted or purged), a blocks-DAG with witnesses, ``grounded_in``
missions (epics and tasks), Zipf-distributed recalls, recall misses that are typos of
words the capsules really contain, lane overrides, git corroborations, tiers, expiring
capsules and timestamps with up to nine fractional digits.

Everything is a pure function of the arguments: every random draw comes from a
``random.Random`` seeded with ``(seed, component)`` and every frame is built with
order-preserving Polars operations, so the same arguments give the same tables. Rows are
written through the store in bulk commits (``Store.ingest`` with large frames,
``Store.append`` for event tables); only sessions and git scans use the one-row verbs.
The capsules are made a chunk at a time from a compact plan, each random stream read a
chunk at a time too (`_Blocks`), so how a store is split into chunks never shows in it.

`miss_truth` returns the generator's ground truth for the recall-miss ledger (which
typo came from which word), so an offline miss audit can be scored against it.
`recall_truth` returns the ground truth of the recall receipts (nMEMORY 0.3.0) it writes
with event times and epistemics: the planted dead weight (capsules nothing ever recalled
or returned) and, for every missed term, what answered it after its last miss (receipts
planted for that, or capsules that hold the word), for the recall-coverage audit and the
life of a miss to be scored against.
`sample_store_path` finds the bundled sample store (``data/sample-store``).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import functools
import itertools
import math
import random
import tempfile
from collections.abc import Callable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import polars as pl

from memframe import budget
from memframe.errors import InvalidInputError, MemframeError
from memframe.schema import RECALL_LANES
from memframe.store import Store
from memframe.store.tables import PART_ROWS
from memframe.text import fold_expr, fold_term, rfc3339

__all__ = [
    "synthesize",
    "miss_truth",
    "recall_truth",
    "RecallTruth",
    "sample_store_path",
    "SynthParams",
    "VOCABULARY",
    "ABSENT_WORDS",
    "PROJECTS",
    "THREADS",
    "DEFAULT_CLOCK_START",
    "typo_of",
]

DEFAULT_CLOCK_START = datetime.datetime(2026, 5, 4, 9, 0, tzinfo=datetime.UTC)
#: capsules `synthesize` makes and writes per chunk when no memory budget is set (a
#: budget may take it down to one ingest commit's rows, ``chunk_rows``)
_CHUNK_CAPSULES = 200_000
# The memory budget's figures (`_chunk_capsules`), from peak RSS measured at 1M and 3M
# capsules with chunks of 100k to 400k: what a chunk costs per capsule it holds (its
# plan rows with their content, the ingest commit's copies of them), and what stays for
# the whole run, a fixed part (the interpreter and libraries) and a part per capsule of
# the store (the compact plan and what the events keep of every capsule, the store's
# lookups, the event tables and their one-commit writes, e.g. every classification
# with its journal row).
_CHUNK_BYTES = 1_000
_FIXED_BYTES = 250e6
_STORE_BYTES = 400
_NS = 1_000_000_000
_DAY_NS = 86_400 * _NS
_TS = pl.Datetime("ns", "UTC")

# Words the capsules talk about. Pairwise at least 3 edits apart (optimal string
# alignment distance), so a one-edit typo has exactly one nearest word.
VOCABULARY: tuple[str, ...] = tuple("""
retrieval latency migration deployment schema rollback kubernetes postgres
index cache throughput handoff embedding tokenizer scheduler backlog
replica snapshot checksum manifest certificate gateway webhook payload
session cursor partition compaction vacuum journal ledger tombstone
quarantine archive audit witness sprint release hotfix
pipeline artifact container sidecar ingress firewall bastion tunnel
monitoring alerting dashboard runbook oncall incident postmortem outage
budget forecast invoice billing quota tenant onboarding signup
frontend backend router middleware serializer validator parser compiler
linter formatter bundler sourcemap storybook component stylesheet
accessibility localization timezone calendar reminder notification
mailbox template renderer thumbnail upload download storage
encryption rotation secret credential keychain permission scope
analytics telemetry sampling histogram percentile benchmark profiler
regression flakiness coverage harness mocking sandbox staging
production canary rollout feature toggle experiment cohort
retention churn pricing discount coupon refund dispute ticket
escalation triage priority severity assignee reviewer approval merge
conflict branch commit changelog upgrade deprecation
dependency license compliance privacy consent deletion export
importer crawler scraper ranking relevance synonym
vector cluster shard follower heartbeat timeout
backoff circuit breaker bulkhead throttle debounce queue worker
""".split())

# Real words a recall asked for that no capsule holds (misses that are not typos).
ABSENT_WORDS: tuple[str, ...] = (
    "kafka", "terraform", "grafana", "graphql", "websocket", "airflow", "snowflake",
    "mongodb", "elastic", "nginx", "ansible", "jenkins", "datadog", "zipkin", "cafe",
)

# (project_id, weight, components used in file anchors)
PROJECTS: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("team", 0.07, ("docs", "planning")),
    ("team/api", 0.20, ("handlers", "auth", "models", "search")),
    ("team/web", 0.16, ("pages", "components", "styles")),
    ("team/mobile", 0.07, ("screens", "sync")),
    ("ops", 0.06, ("policies",)),
    ("ops/infra", 0.15, ("terraform_modules", "clusters", "network")),
    ("ops/oncall", 0.08, ("runbooks", "alerts")),
    ("research", 0.08, ("notes",)),
    ("research/evals", 0.08, ("suites", "reports")),
    ("default", 0.05, ("misc",)),
)

# ACTIVE(<thread>) labels of the thread handoffs.
THREADS: tuple[str, ...] = (
    "scrub", "ingest-backfill", "auth-rotation", "perf-budget", "release-train",
    "schema-v2", "flaky-ci", "cost-review", "search-relevance", "pager-noise",
    "data-retention", "mobile-sync", "edge-cache", "billing-export", "evals-refresh",
)

_AUTHORS = ("agent:planner", "agent:builder", "agent:reviewer", "agent:oncall",
            "user:ana", "user:kofi", "user:mei", "user:ravi")
_AUTHOR_W = (0.22, 0.30, 0.12, 0.08, 0.08, 0.08, 0.06, 0.06)
_VERBS = ("tune", "split", "pin", "retire", "document", "measure", "simplify", "harden",
          "rewrite", "trace", "batch", "shard", "drop", "rename", "gate")
_KINDS = ("fact", "decision", "procedure", "doc", "brainstorm", "constraint", "capability",
          "failure_pattern", None)
_KIND_W = (0.33, 0.12, 0.12, 0.08, 0.08, 0.05, 0.05, 0.05, 0.12)
# (source, weight, authority class)
_SOURCES = (("conversation", 0.56), ("note", 0.14), ("file", 0.15), ("git-commit", 0.08),
            ("web", 0.05), ("import", 0.02))
_FORGET_REASONS = ("duplicate of a newer note", "stale after the migration", "user asked to forget",
                   "wrong project", "superseded by the runbook")
_ERASE_REASONS = ("contained a credential", "personal data", "pasted a secret by mistake")
_LANES = (("term", "fused"), ("vector", "fused"), ("vector", "term"), ("fused", "term"))
_LANE_W = (0.45, 0.25, 0.2, 0.1)
_REPOS = ("git:/srv/repos/memframe-demo", "git:/srv/repos/infra")

# Templates of plain capsules, per kind: literal text and word slots w1..w6, "verb", "comp".
_TEMPLATES: dict[str | None, tuple[str, ...]] = {
    "fact": ("The ", "w1", " ", "w2", " uses ", "w3", " for ", "w4", " in ", "comp"),
    "decision": ("Decided to ", "verb", " the ", "w1", " ", "w2", " before the ", "w3", " ",
                 "w4"),
    "procedure": ("To ", "verb", " the ", "w1", " ", "w2", ": run the ", "w3", " step, then "
                  "check ", "w4"),
    "doc": ("Notes on ", "w1", " and ", "w2", " for the ", "comp", " ", "w3"),
    "brainstorm": ("Idea: ", "verb", " ", "w1", " through ", "w2", " and ", "w3", "?"),
    "constraint": ("Never ", "verb", " ", "w1", " ", "w2", " without a ", "w3", " ", "w4"),
    "capability": ("We can now ", "verb", " ", "w1", " ", "w2", " with the ", "w3"),
    "failure_pattern": ("The ", "w1", " ", "w2", " fails when ", "w3", " ", "w4",
                        " exceeds its budget"),
    None: ("Saw ", "w1", " ", "w2", " next to ", "w3", " in ", "comp"),
}
_DETAIL = ("\nDetails: ", "w5", " ", "w6", " affects the ", "w2", "; see ", "anchor")


@dataclasses.dataclass(frozen=True)
class SynthParams:
    """The sizes a synthetic store derives from its capsule count.

    Examples:
        >>> p = SynthParams.for_capsules(3000)
        >>> (p.capsules, p.epics, p.sessions, p.span_days)
        (3000, 15, 30, 40)
    """

    capsules: int
    span_days: int
    sessions: int
    threads: int
    epics: int
    tasks: int
    misses: int
    lane_overrides: int
    rollups: int = 2
    receipts: int = 0

    @classmethod
    def for_capsules(cls, capsules: int) -> SynthParams:
        """Sizes for a store of ``capsules`` capsules (at least 200)."""
        if not isinstance(capsules, int) or isinstance(capsules, bool) or capsules < 200:
            raise InvalidInputError(
                f"a synthetic store needs at least 200 capsules to hold its structure; "
                f"got {capsules!r}"
            )
        n = capsules
        return cls(
            capsules=n,
            span_days=min(365, 28 + n // 250),
            sessions=_clamp(n // 100, 6, 40),
            threads=_clamp(n // 500, 3, len(THREADS)),
            epics=_clamp(n // 200, 3, 500),
            tasks=_clamp(n // 40, 12, 5000),
            misses=_clamp(n // 25, 40, 20000),
            lane_overrides=_clamp(n // 200, 5, 5000),
            receipts=n // 2,
        )


def _clamp(x: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, x))


def _rng(seed: int, part: str) -> random.Random:
    return random.Random(f"memframe-synth:{seed}:{part}")


def _uniform(rng: random.Random, n: int) -> pl.Series:
    """``n`` uniforms in [0, 1) from ``rng``'s bytes (53 random bits each)."""
    if n == 0:
        return pl.Series([], dtype=pl.Float64)
    return _uniform_of(rng.randbytes(8 * n), n)


def _uniform_of(data: bytes, n: int) -> pl.Series:
    """The ``n`` uniforms `_uniform` makes of ``8 * n`` random bytes."""
    import pyarrow as pa  # on use: the command line loads this module for the sample's path

    if n == 0:
        return pl.Series([], dtype=pl.Float64)
    words = pa.Array.from_buffers(pa.uint64(), n, [None, pa.py_buffer(data)])
    bits = pl.Series(pl.from_arrow(words))
    return ((bits // 2048).cast(pl.Float64) * 2.0**-53).rename("")


_SKIP_BYTES = 8 << 20  # random bytes drawn at a time to pass over a block


def _skip(rng: random.Random, nbytes: int) -> None:
    """Advance ``rng`` as ``rng.randbytes(nbytes)`` would, a bounded piece at a time.

    ``nbytes`` is a multiple of 4: the generator hands out whole 32-bit words, so drawing
    the same bytes in pieces leaves it in the same state."""
    while nbytes > 0:
        step = min(nbytes, _SKIP_BYTES)
        rng.getrandbits(8 * step)
        nbytes -= step


class _Blocks:
    """Rows ``lo..hi`` of columns that one stream draws whole, one after another.

    ``_uniform(rng, n)`` called k times draws k blocks of ``n`` values: the first column's
    all before the second's, so one row's values lie far apart in the stream. A copy of
    the generator waits at each block's start (the blocks before it passed over once), and
    `take` reads the next rows of every block: a chunk of rows costs its own draws, and
    the chunks in order give exactly the whole columns.
    """

    def __init__(self, rng: random.Random, n: int, widths: Sequence[int], *,
                 after: bool = False):
        """``widths``: bytes per row of each block (8 for uniforms); ``after``: leave
        ``rng`` past the last block (its stream goes on), else it stays at that block's
        start, which saves passing over it."""
        self._cursors: list[random.Random] = []
        self._widths = tuple(widths)
        for i, width in enumerate(self._widths):
            cursor = random.Random()
            cursor.setstate(rng.getstate())
            self._cursors.append(cursor)
            if after or i < len(self._widths) - 1:
                _skip(rng, width * n)

    def take(self, m: int) -> list[bytes]:
        """The next ``m`` rows' bytes of every block."""
        return [cursor.randbytes(width * m) if m else b""
                for cursor, width in zip(self._cursors, self._widths, strict=True)]

    def uniforms(self, m: int) -> list[pl.Series]:
        """The next ``m`` uniforms of every block (blocks of width 8)."""
        return [_uniform_of(data, m) for data in self.take(m)]


def _pick(u: pl.Series | pl.Expr, weights: Sequence[float]) -> pl.Expr:
    """Index into ``weights`` for uniforms ``u`` (inverse CDF), as an expression."""
    total = float(sum(weights))
    cum = list(itertools.accumulate(w / total for w in weights))
    expr = u if isinstance(u, pl.Expr) else pl.lit(u)
    out = pl.lit(len(weights) - 1, dtype=pl.Int64)
    for i in range(len(weights) - 2, -1, -1):
        out = pl.when(expr < cum[i]).then(pl.lit(i, dtype=pl.Int64)).otherwise(out)
    return out


def _lookup(values: Sequence[Any] | pl.Series, index: pl.Expr) -> pl.Expr:
    """``values[index]`` per row, as an expression (index: an integer expression)."""
    return index.cast(pl.Int64).replace_strict(
        dict(enumerate(list(values))), return_dtype=pl.String, default=None)


def _zipf_cdf(n: int, s: float) -> pl.Series:
    weights = pl.int_range(1, n + 1, eager=True).cast(pl.Float64).pow(-s)
    return weights.cum_sum() / weights.sum()


def _zipf_index(u: pl.Series, cdf: pl.Series) -> pl.Series:
    """Zipf ranks (0-based) for uniforms ``u`` by search in the cumulative weights."""
    idx = cdf.search_sorted(u, side="right").cast(pl.Int64)
    return idx.clip(0, cdf.len() - 1)


def _ns(instant: datetime.datetime) -> int:
    instant = instant.astimezone(datetime.UTC)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    delta = instant - epoch
    return (delta.days * 86_400 + delta.seconds) * _NS + delta.microseconds * 1000


def _dt(ns: int) -> datetime.datetime:
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return epoch + datetime.timedelta(microseconds=ns // 1000)


# ---- typos -------------------------------------------------------------------------------

_KEY_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_NEIGHBOURS: dict[str, str] = {}
for _r, _row in enumerate(_KEY_ROWS):
    for _i, _ch in enumerate(_row):
        near = [_row[j] for j in (_i - 1, _i + 1) if 0 <= j < len(_row)]
        for _other in (_r - 1, _r + 1):
            if 0 <= _other < len(_KEY_ROWS):
                near.extend(_KEY_ROWS[_other][j] for j in (_i - 1, _i)
                            if 0 <= j < len(_KEY_ROWS[_other]))
        _NEIGHBOURS[_ch] = "".join(sorted(set(near)))

_TYPO_OPS = ("transpose", "delete", "substitute", "insert")
_TYPO_W = (0.35, 0.25, 0.25, 0.15)


def _literal_tokens() -> frozenset[str]:
    words: set[str] = set(VOCABULARY) | set(ABSENT_WORDS) | set(_VERBS)
    texts = [piece for t in (*_TEMPLATES.values(), _DETAIL) for piece in t]
    texts += [p for p, _, comps in PROJECTS for p in (p, *comps)] + list(THREADS)
    texts += ["epic", "task", "handoff", "closed", "next", "goal", "status", "summary", "ref",
              "details", "see", "rollup", "of", "conv", "file", "note", "import", "legacy"]
    for text in texts:
        token = ""
        for ch in text.lower() + " ":
            if ch.isalnum():
                token += ch
            elif token:
                words.add(token)
                token = ""
    return frozenset(words)


_TOKENS = _literal_tokens()


def typo_of(word: str, rng: random.Random,
            avoid: frozenset[str] = frozenset()) -> tuple[str, str]:
    """One realistic one-edit typo of ``word`` and the edit's name.

    The edit is an adjacent transposition, a deletion, a keyboard-neighbour substitution
    or an insertion (at most 2 Levenshtein edits; one optimal-string-alignment edit).
    The typo is never a word any synthetic capsule contains, nor one of ``avoid``.

    Examples:
        >>> import random
        >>> typo, edit = typo_of("retrieval", random.Random(1))
        >>> typo != "retrieval" and edit in ("transpose", "delete", "substitute", "insert")
        True
    """
    for _ in range(64):
        op = rng.choices(_TYPO_OPS, _TYPO_W)[0]
        i = rng.randrange(len(word))
        if op == "transpose":
            if i + 1 >= len(word) or word[i] == word[i + 1]:
                continue
            typo = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        elif op == "delete":
            typo = word[:i] + word[i + 1:]
        elif op == "substitute":
            near = _NEIGHBOURS.get(word[i], "")
            if not near:
                continue
            typo = word[:i] + rng.choice(near) + word[i + 1:]
        else:
            near = _NEIGHBOURS.get(word[i], "") + word[i]
            typo = word[:i] + rng.choice(near) + word[i:]
        if typo != word and len(typo) >= 4 and typo not in _TOKENS and typo not in avoid:
            return typo, op
    raise MemframeError(f"no typo found for {word!r}")  # unreachable for the vocabulary


# ---- noise (opt-in): what real stores hold besides words -----------------------------------

# Phrases with Latin diacritics (names, places, loanwords); they fold to ASCII words.
_DIACRITIC_PHRASES: tuple[str, ...] = (
    "reviewed with Zoë in Zürich", "the naïve fallback stays", "Núñez signed off in São Paulo",
    "a façade over the legacy client", "résumé of the Malmö offsite",
    "notes from the Kraków office", "crème brûlée friday", "déjà vu from Łódź",
)
# Folded words of those phrases that a recall may ask for, spelled right.
_DIACRITIC_WORDS: tuple[str, ...] = (
    "zurich", "naive", "nunez", "facade", "resume", "malmo", "krakow", "brulee", "lodz",
)
# Literal text of the noise fragments (its tokens are never a typo's spelling).
_NOISE_LITERALS = (
    "trace fixed in commit cap sess PR ticket node p99 ms of requests took faster GB at "
    "get Error MAX release"
)
_CONTENT_TYPOS_PER_WORD = 2


def _params(capsules: int, misses: int | None, receipts: int | None = None) -> SynthParams:
    params = SynthParams.for_capsules(capsules)
    for name, value in (("misses", misses), ("receipts", receipts)):
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise InvalidInputError(f"{name} must be a non-negative integer, got {value!r}")
        params = dataclasses.replace(params, **{name: value})
    return params


def _plural(word: str) -> str:
    return word + ("es" if word.endswith(("s", "x", "h")) else "s")


def _ascii_tokens(text: str) -> set[str]:
    folded = "".join(ch if ch.isascii() else " " for ch in fold_term(text))
    return {t for t in "".join(ch if ch.isalnum() else " " for ch in folded).split() if t}


@functools.lru_cache(maxsize=8)
def _noise_lexicon(seed: int) -> tuple[dict[str, tuple[str, ...]], frozenset[str]]:
    """The misspellings noisy capsules use for each word, and every token the noise can put
    in a capsule that a miss typo must not equal (plurals, misspellings, phrase words)."""
    words = set(VOCABULARY)
    plurals = {_plural(w) for w in VOCABULARY}
    phrase = set().union(*(_ascii_tokens(p) for p in _DIACRITIC_PHRASES))
    literal = _ascii_tokens(_NOISE_LITERALS)
    avoid = frozenset(plurals | phrase | literal)
    rng = _rng(seed, "noise-typos")
    typos: dict[str, tuple[str, ...]] = {}
    taken: set[str] = set()
    for word in VOCABULARY:
        picked: list[str] = []
        while len(picked) < _CONTENT_TYPOS_PER_WORD:
            typo, _ = typo_of(word, rng, avoid | taken)
            if typo not in words:
                picked.append(typo)
                taken.add(typo)
        typos[word] = tuple(picked)
    return typos, avoid | frozenset(taken)


def _absent_identifier(rng: random.Random) -> str:
    """An identifier-like term no capsule holds."""
    kind = rng.randrange(4)
    if kind == 0:
        return f"{rng.getrandbits(28):07x}"
    if kind == 1:
        return f"cap-{rng.randrange(10**7, 10**8)}"
    if kind == 2:
        return f"sess-{rng.randrange(10**4, 10**5)}"
    return f"{rng.getrandbits(32):08x}"


_NOISE_WORD_DRAWS = 5  # uniforms per row of the "noise-words" stream (`_noisy_words`)


def _noisy_words(seed: int, rows: pl.DataFrame, draws: Sequence[pl.Series]) -> pl.DataFrame:
    """Word slots of plain rows with mixed case (w1), plurals (w2), misspellings (w3);
    ``draws``: the rows' uniforms of the ``noise-words`` stream."""
    u_case, u_kind, u_plural, u_typo, u_which = draws
    typos, _ = _noise_lexicon(seed)
    plain = pl.col("role") == "plain"
    w2 = pl.col("w2")
    w3 = pl.col("w3")
    misspelt = pl.lit(None, dtype=pl.String)
    for k in range(_CONTENT_TYPOS_PER_WORD - 1, -1, -1):
        choice = w3.replace_strict({w: t[k] for w, t in typos.items()}, return_dtype=pl.String)
        misspelt = pl.when(pl.lit(u_which) * _CONTENT_TYPOS_PER_WORD < k + 1).then(choice) \
            .otherwise(misspelt)
    return rows.with_columns(
        pl.when(plain & (pl.lit(u_case) < 0.15))
        .then(pl.when(pl.lit(u_kind) < 0.6).then(pl.col("w1").str.to_titlecase())
              .otherwise(pl.col("w1").str.to_uppercase()))
        .otherwise(pl.col("w1")).alias("w1"),
        pl.when(plain & (pl.lit(u_plural) < 0.10))
        .then(pl.when(w2.str.contains("[sxh]$")).then(w2 + "es").otherwise(w2 + "s"))
        .otherwise(w2).alias("w2"),
        pl.when(plain & (pl.lit(u_typo) < 0.015)).then(misspelt).otherwise(w3).alias("w3"),
    )


_NOISE_NAMES = ("uuid", "hash", "hash_kind", "id", "id_kind", "num", "num_kind", "ident",
                "ident_kind", "dia", "dia_k", "a", "b", "c")
# bytes per row of each block of the "noise" stream (`_noise_tail`): its uniforms, then
# 20 raw bytes (a hash)
_NOISE_WIDTHS = (8,) * len(_NOISE_NAMES) + (20,)


def _noise_tail(rows: pl.DataFrame, draws: Sequence[bytes]) -> pl.Expr:
    """The content of plain rows with a noisy last line (references, ids, numbers, code
    identifiers, diacritics), as an expression aliased ``content``; ``draws``: the rows'
    bytes of each block of the ``noise`` stream (`_NOISE_WIDTHS`)."""
    n = rows.height
    u = {name: pl.lit(_uniform_of(data, n)) for name, data in zip(_NOISE_NAMES, draws[:-1],
                                                                  strict=True)}
    import pyarrow as pa

    raw = pa.Array.from_buffers(pa.binary(20), n, [None, pa.py_buffer(draws[-1])])
    hexes = pl.lit(pl.Series(pl.from_arrow(raw)).cast(pl.Binary).bin.encode("hex"))
    a = (u["a"] * 9000 + 10).cast(pl.Int64)
    b = (u["b"] * 99 + 1).cast(pl.Int64)
    c = (u["c"] * 9 + 1).cast(pl.Int64)
    uuid = pl.concat_str([hexes.str.slice(0, 8), hexes.str.slice(8, 4),
                          pl.lit("4") + hexes.str.slice(13, 3), hexes.str.slice(16, 4),
                          hexes.str.slice(20, 12)], separator="-")

    def choose(uk: pl.Expr, options: Sequence[pl.Expr]) -> pl.Expr:
        out = options[-1]
        for i in range(len(options) - 2, -1, -1):
            out = pl.when(uk * len(options) < i + 1).then(options[i]).otherwise(out)
        return out

    w4, w5 = pl.col("w4"), pl.col("w5")
    ref = choose(u["hash_kind"], [pl.lit("fixed in ") + hexes.str.slice(0, 7),
                                  pl.lit("commit ") + hexes])
    ident_ref = choose(u["id_kind"], [
        pl.concat_str([pl.lit("cap-"), a]), pl.concat_str([pl.lit("sess-"), b]),
        pl.concat_str([pl.lit("PR #"), a]), pl.concat_str([pl.lit("ticket-"), a]),
        pl.concat_str([pl.lit("node_"), b]),
        pl.concat_str([pl.lit("release v"), c, pl.lit("."), b, pl.lit("."), c])])
    number = choose(u["num_kind"], [
        pl.concat_str([pl.lit("p99 "), a, pl.lit("ms")]),
        pl.concat_str([b, pl.lit("% of "), a, pl.lit(" requests")]),
        pl.concat_str([pl.lit("took "), b, pl.lit("s")]),
        pl.concat_str([c, pl.lit("x faster")]),
        pl.concat_str([c, pl.lit("."), b, pl.lit("GB")]),
        pl.concat_str([pl.lit("at 2026-05-"), (b % 28 + 1).cast(pl.String).str.zfill(2)])])
    code = choose(u["ident_kind"], [
        pl.concat_str([w4, pl.lit("_"), w5]),
        pl.concat_str([w4, w5.str.to_titlecase()]),
        pl.concat_str([w4.str.to_titlecase(), w5.str.to_titlecase()]),
        pl.concat_str([w4, pl.lit("."), w5, pl.lit("()")]),
        pl.concat_str([pl.lit("get_"), w4, pl.lit("_"), w5]),
        pl.concat_str([w4.str.to_titlecase(), pl.lit("Error")]),
        pl.concat_str([w4.str.to_uppercase(), pl.lit("_MAX")])])
    phrase = _lookup(_DIACRITIC_PHRASES, (u["dia_k"] * len(_DIACRITIC_PHRASES)).cast(pl.Int64))
    tail = pl.concat_str([
        pl.when(u["uuid"] < 0.20).then(pl.lit("trace ") + uuid),
        pl.when(u["hash"] < 0.15).then(ref),
        pl.when(u["id"] < 0.20).then(ident_ref),
        pl.when(u["num"] < 0.30).then(number),
        pl.when(u["ident"] < 0.25).then(code),
        pl.when(u["dia"] < 0.08).then(phrase),
    ], separator="; ", ignore_nulls=True)
    return (pl.when((pl.col("role") == "plain") & (tail != ""))
            .then(pl.concat_str([pl.col("content"), pl.lit("\n"), tail]))
            .otherwise(pl.col("content")).alias("content"))


def _miss_plan(seed: int, params: SynthParams, clock_start: datetime.datetime,
               noise: bool = False) -> pl.DataFrame:
    """The recall-miss rows, in write order: at, term, outcome, word, edit.

    With ``noise``, typos also avoid every token the noise puts in capsules, about one
    miss in twenty is a correctly spelled word of the diacritic phrases (folded) and one in
    twenty an identifier no capsule holds (a short hash, ``cap-…``, ``sess-…``).
    """
    rng = _rng(seed, "misses")
    avoid = _noise_lexicon(seed)[1] if noise else frozenset()
    noise_rng = _rng(seed, "noise-misses") if noise else None
    start = _ns(clock_start)
    span = params.span_days * _DAY_NS
    word_cdf = list(itertools.accumulate(1.0 / (k + 1) ** 0.8 for k in range(len(VOCABULARY))))
    order = list(VOCABULARY)
    rng.shuffle(order)  # which words are popular in queries
    rows: list[tuple[int, str, str, str | None, str]] = []
    for _ in range(params.misses):
        u = rng.random()
        if u < 0.72:
            word = rng.choices(order, cum_weights=word_cdf)[0]
            term, edit = typo_of(word, rng, avoid)
            outcome = "abstain" if rng.random() < 0.8 else "missing_evidence"
        elif u < 0.85:
            word = rng.choices(order, cum_weights=word_cdf)[0]
            term, edit = word, "exact"
            outcome = "missing_evidence"
        else:
            term, word, edit = rng.choice(ABSENT_WORDS), None, "absent"
            outcome = "abstain"
        at = start + int(rng.random() * span)
        if noise_rng is not None:
            v = noise_rng.random()
            if v < 0.05:
                term = word = noise_rng.choice(_DIACRITIC_WORDS)
                edit, outcome = "exact", "missing_evidence"
            elif v < 0.10:
                term, word, edit, outcome = _absent_identifier(noise_rng), None, "absent", "abstain"
        rows.append((at, term, outcome, word, edit))
    rows.sort(key=lambda r: r[0])
    # one query recorded through the verb at the end (its terms are folded by the store)
    word = order[0]
    typo, edit = typo_of(word, rng, avoid)
    end = start + span
    rows.append((end, typo, "abstain", word, edit))
    rows.append((end, "cafe", "abstain", None, "absent"))
    return pl.DataFrame(
        rows, schema={"at": pl.Int64, "term": pl.String, "outcome": pl.String,
                      "word": pl.String, "edit": pl.String}, orient="row",
    ).with_columns(pl.col("at").cast(_TS))


def miss_truth(seed: int = 0, *, capsules: int = 3000,
               clock_start: datetime.datetime = DEFAULT_CLOCK_START, noise: bool = False,
               misses: int | None = None) -> pl.DataFrame:
    """The ground truth of a synthetic store's recall-miss ledger, row for row.

    One row per ``recall_misses`` row, in seq order: ``at``, ``term`` (folded),
    ``outcome``, ``word`` (the vocabulary word the term was meant to be, null for a
    real word no capsule holds) and ``edit`` (``transpose``/``delete``/``substitute``/
    ``insert`` for a typo, ``exact`` for a correctly spelled word, ``absent``).

    Args:
        seed: the seed given to `synthesize`.
        capsules: the capsule count given to `synthesize`.
        clock_start: the clock start given to `synthesize`.
        noise: the ``noise`` flag given to `synthesize`.
        misses: the ``misses`` count given to `synthesize` (None: the default for
            ``capsules``).

    Examples:
        >>> truth = miss_truth(0, capsules=3000)
        >>> truth.columns
        ['at', 'term', 'outcome', 'word', 'edit']
        >>> truth.filter(pl.col("edit") == "transpose").height > 0
        True
    """
    return _miss_plan(seed, _params(capsules, misses), clock_start, noise)


# ---- the capsule plan --------------------------------------------------------------------

def _per_case(rows: pl.DataFrame, key: str, name: str,
              cases: dict[str | None, pl.Expr]) -> pl.Series:
    """Column ``name`` computed case by case: each expression only on the rows of its key.

    ``rows`` has a ``pos`` column 0..n-1 in order and every ``key`` value has a case.
    """
    parts = [rows.filter(pl.col(key) == value).select("pos", expr.alias(name))
             for value, expr in cases.items()]
    out = pl.concat(parts).sort("pos")
    if out.height != rows.height:
        raise MemframeError(f"synth: {rows.height - out.height} rows have no {name} case")
    return out[name]


def _template_expr(pieces: Sequence[str]) -> pl.Expr:
    parts = [pl.col(p) if p in ("w1", "w2", "w3", "w4", "w5", "w6", "verb", "comp", "anchor")
             else pl.lit(p) for p in pieces]
    return pl.concat_str(parts)


def _words(u: pl.Series, cdf: pl.Series, order: pl.Series) -> pl.Series:
    return order.gather(_zipf_index(u, cdf))


_CONV_BATCH = 100_000  # conversations kept as Python rows before they become a frame
_ROW_DRAWS = 7  # uniforms per plain capsule of the "rows" stream (`_plain_times`)
# the uniforms per capsule of the "content" stream (`_Plan.fill`), in the order it draws them
_CONTENT_DRAWS = ("w2", "w3", "w4", "w5", "w6", "verb", "comp", "kind", "source", "auth",
                  "conf", "detail", "valid", "valid_len", "line", "sha")


def _conversations(seed: int, n: int, start: int, span: int) -> pl.DataFrame:
    """The bursty conversations ``n`` plain capsules fall into, in order: ``conv``,
    ``size``, ``project``, ``author``, ``standalone``, ``conv_start`` and
    ``conversation_id`` (null for a standalone note). About one row per twelve capsules;
    the Python rows become a frame a batch at a time, so they never pile up."""
    rng = _rng(seed, "conversations")
    first_weekday = _dt(start).weekday()
    project_cdf = list(itertools.accumulate(w for _, w, _ in PROJECTS))
    schema = {"conv": pl.Int64, "size": pl.Int64, "project": pl.Int64, "author": pl.Int64,
              "standalone": pl.Boolean, "conv_start": pl.Int64}
    parts: list[pl.DataFrame] = []
    convs: list[tuple[int, int, int, int, bool, int]] = []
    total = 0
    k = 0
    while total < n:
        standalone = rng.random() < 0.12
        size = 1 if standalone else 1 + min(int(rng.expovariate(1 / 13)), 120)
        size = min(size, n - total)
        project = rng.choices(range(len(PROJECTS)), cum_weights=project_cdf)[0]
        author = rng.choices(range(len(_AUTHORS)), _AUTHOR_W)[0]
        days = span // _DAY_NS
        day = int(rng.random() * days)
        weekday = (first_weekday + day) % 7
        if weekday >= 5 and rng.random() < 0.7:  # fewer conversations at weekends
            day = min(day + 7 - weekday, days - 1)
        at = start + day * _DAY_NS + int((7 + rng.random() * 14) * 3600 * _NS)
        convs.append((k, size, project, author, standalone, at))
        total += size
        k += 1
        if len(convs) == _CONV_BATCH:
            parts.append(pl.DataFrame(convs, orient="row", schema=schema))
            convs = []
    parts.append(pl.DataFrame(convs, orient="row", schema=schema))
    conv = pl.concat(parts)
    ids = pl.concat([
        pl.Series([f"{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-"
                   f"4{rng.getrandbits(12):03x}-{8 + rng.getrandbits(2):x}"
                   f"{rng.getrandbits(12):03x}-{rng.getrandbits(48):012x}"
                   for _ in range(lo, min(lo + _CONV_BATCH, conv.height))], dtype=pl.String)
        for lo in range(0, conv.height, _CONV_BATCH)])
    return conv.with_columns(
        pl.when(pl.col("standalone")).then(None).otherwise(ids).alias("conversation_id"))


def _precision(created: pl.Expr, u_prec: pl.Expr) -> pl.Expr:
    """Up to nine fractional digits, trimmed (whole seconds, ms, us or ns)."""
    return (pl.when(u_prec < 0.35).then(created // _NS * _NS)
            .when(u_prec < 0.55).then(created // 1_000_000 * 1_000_000)
            .when(u_prec < 0.75).then(created // 1000 * 1000)
            .otherwise(created))


def _plain_times(convs: pl.DataFrame, draws: Sequence[pl.Series], start: int,
                 end: int) -> pl.DataFrame:
    """The plain capsules of whole conversations ``convs``, in order: ``conv``, ``k`` (the
    place in the conversation), ``created_ns`` (with its precision) and ``arrive_ns``
    (when it is ingested: ~3% arrive late); ``draws``: their uniforms of the ``rows``
    stream."""
    u_gap, u_pause, u_pause_len, u_nanos, u_prec, u_late, u_late_len = draws
    rows = (convs.select("conv", "size", "conv_start")
            .with_columns(pl.int_ranges(0, "size").alias("k")).explode("k"))
    gap_s = (-(1.0 - u_gap).log()) * 75.0
    pause = u_pause < 0.05
    gap_s = pl.select(
        pl.when(pl.lit(pause)).then(3600.0 * (1.0 + 7.0 * pl.lit(u_pause_len)))
        .otherwise(pl.lit(gap_s))
    ).to_series()
    gap_ns = (gap_s * _NS).cast(pl.Int64) + (u_nanos * 999_999_999).cast(pl.Int64) % 1000
    rows = rows.with_columns(
        pl.when(pl.col("k") == 0).then(0).otherwise(pl.lit(gap_ns)).alias("gap"),
        pl.lit(u_prec).alias("u_prec"),
        pl.lit(u_late).alias("u_late"),
        pl.lit(u_late_len).alias("u_late_len"),
    ).with_columns(
        (pl.col("conv_start") + pl.col("gap").cum_sum().over("conv")).clip(start, end - _NS)
        .alias("created_ns")
    )
    return rows.select(
        pl.col("conv").cast(pl.Int32), pl.col("k").cast(pl.Int32),
        _precision(pl.col("created_ns"), pl.col("u_prec")).alias("created_ns"),
        _arrival(pl.col("created_ns"), pl.col("u_late"), pl.col("u_late_len")),
    )


def _arrival(created: pl.Expr, u_late: pl.Expr, u_late_len: pl.Expr) -> pl.Expr:
    """Ingest time: creation time, except ~3% that arrive late (imports, offline clients)."""
    return (created + pl.when(u_late < 0.03).then((u_late_len * 6 * 3600 * _NS)
                                                   .cast(pl.Int64)).otherwise(0)
            ).alias("arrive_ns")


def _structured(seed: int, params: SynthParams, start: int, end: int,
                dag_cycle: bool) -> pl.DataFrame:
    """Epics, tasks and thread rows: structured capsules with their own times (``role``,
    ``no``, ``project``, ``created_ns``, ``parent_epic``, ``thread``, ``step``)."""
    span = end - start
    cycle_tasks = 3 if dag_cycle else 0
    rng = _rng(seed, "structure")
    structured: list[dict[str, Any]] = []
    epic_project: list[int] = []
    for e in range(params.epics):
        p = rng.choices(range(len(PROJECTS)), [w for _, w, _ in PROJECTS])[0]
        epic_project.append(p)
        t = start + int(rng.random() * 0.7 * span)
        parent = None
        same = [i for i in range(e) if epic_project[i] == p]
        if same and rng.random() < 0.3:
            parent = rng.choice(same)
        structured.append({"role": "epic", "no": e, "project": p, "created_ns": t,
                           "parent_epic": parent, "thread": None, "step": None})
    epic_time = [s["created_ns"] for s in structured]
    for t_no in range(params.tasks + cycle_tasks):
        cyc = t_no >= params.tasks
        if cyc:
            e = 0
        else:
            e = t_no % params.epics if t_no < params.epics * 2 else rng.randrange(params.epics)
        anchored = cyc or rng.random() < 0.85
        t = epic_time[e] + int(rng.random() * (end - epic_time[e]) * 0.8) + _NS
        structured.append({"role": "task", "no": t_no, "project": epic_project[e],
                           "created_ns": t, "parent_epic": e if anchored else None,
                           "thread": None, "step": None})
    for th in range(params.threads):
        p = rng.choices(range(len(PROJECTS)), [w for _, w, _ in PROJECTS])[0]
        steps = rng.randint(2, 5)
        t = start + int(rng.random() * 0.6 * span)
        for s in range(steps):
            structured.append({"role": "thread", "no": th, "project": p, "created_ns": t,
                               "parent_epic": None, "thread": th, "step": s})
            t += int((0.5 + rng.random() * 3) * _DAY_NS)
        if th % 3 == 2:  # closed out of the lead: a non-ACTIVE row supersedes the newest
            structured.append({"role": "close", "no": th, "project": p,
                               "created_ns": min(t, end - _NS), "parent_epic": None,
                               "thread": th, "step": steps})
    struct = pl.DataFrame(structured, schema={
        "role": pl.String, "no": pl.Int64, "project": pl.Int64, "created_ns": pl.Int64,
        "parent_epic": pl.Int64, "thread": pl.Int64, "step": pl.Int64})
    return struct.with_columns(pl.col("created_ns").clip(start, end - _NS))


def _skeleton(seed: int, params: SynthParams, start: int, end: int, dag_cycle: bool,
              chunk: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The capsule plan's order, compact: one row per capsule in ingest order (``conv``
    and ``k`` of a plain capsule, ``srow`` of a structured one, ``created_ns``,
    ``arrive_ns``), the conversations (`_conversations`) and the structured rows
    (`_structured`). A handful of numbers per capsule: every column the plan has besides
    is made from them a chunk at a time (`_Plan.rows`). The plain capsules' times are
    drawn ``chunk`` capsules at a time (whole conversations)."""
    handoffs = _session_plan(seed, params, _dt(start))["handoff"].drop_nulls().len()
    struct = _structured(seed, params, start, end, dag_cycle)
    n_plain = params.capsules - handoffs - params.rollups - struct.height
    if n_plain < 100:
        raise InvalidInputError(f"{params.capsules} capsules leave too few plain rows")
    convs = _conversations(seed, n_plain, start, end - start)
    draws = _Blocks(_rng(seed, "rows"), n_plain, [8] * _ROW_DRAWS)
    ends = convs["size"].cum_sum()
    parts: list[pl.DataFrame] = []
    first = done = 0
    while first < convs.height:
        stop = min(int(ends.search_sorted(done + chunk, side="left")) + 1, convs.height)
        m = int(ends[stop - 1]) - done
        parts.append(_plain_times(convs.slice(first, stop - first), draws.uniforms(m),
                                  start, end))
        first, done = stop, done + m
    created = pl.col("created_ns")
    rows = pl.concat([
        *parts,
        struct.select(pl.int_range(pl.len(), dtype=pl.Int32).alias("srow"),
                      # a structured capsule has millisecond precision and is never late
                      _precision(created, pl.lit(0.5)).alias("created_ns"),
                      created.alias("arrive_ns")),
    ], how="diagonal")
    del parts
    # ingest order: arrival, ties in plan order (plain capsules first)
    order = (rows.with_row_index("plan_row").sort(["arrive_ns", "plan_row"])
             .drop("plan_row"))
    return order, convs.with_columns(pl.col("conv").cast(pl.Int32)), struct


class _Plan:
    """The capsules the store will ingest in bulk, in ingest order (column ``pos``), made
    a chunk of rows at a time: `rows` fills rows ``lo..hi`` from the compact order
    (`_skeleton`) and the random streams read chunk by chunk (`_Blocks`), so a chunk
    costs its own rows and any split into chunks gives the same rows.

    Roles: plain, epic, task, thread (ACTIVE rows), close (a thread closer).
    """

    def __init__(self, seed: int, params: SynthParams, clock_start: datetime.datetime,
                 dag_cycle: bool, noise: bool = False, chunk: int = 1 << 62):
        self.seed = seed
        self.noise = noise
        self.start = _ns(clock_start)
        self.end = self.start + params.span_days * _DAY_NS
        self.order, self.convs, self.struct = _skeleton(seed, params, self.start, self.end,
                                                        dag_cycle, chunk)
        self.height = self.order.height
        self._chunk = chunk
        # the order's rows not made yet, in pieces of a chunk from `_first` on (made on the
        # first `rows`): each piece goes once its rows are made, so the order shrinks as
        # the capsules written grow
        self._pieces: collections.deque[pl.DataFrame] | None = None
        self._first = 0
        rng = _rng(seed, "content")
        vocab_order = list(VOCABULARY)
        rng.shuffle(vocab_order)
        self._vocab_order = pl.Series(vocab_order)
        self._cdf = _zipf_cdf(len(vocab_order), 0.9)
        self._content = _Blocks(rng, self.height, [8] * len(_CONTENT_DRAWS))
        n = self.height if noise else 0
        self._noise_words = _Blocks(_rng(seed, "noise-words"), n, [8] * _NOISE_WORD_DRAWS)
        self._noise = _Blocks(_rng(seed, "noise"), n, _NOISE_WIDTHS)
        self._next = 0

    def rows(self, lo: int, hi: int) -> pl.DataFrame:
        """Rows ``lo..hi`` of the plan (``lo``: where the previous call stopped)."""
        if lo != self._next or not lo <= hi <= self.height:
            raise MemframeError(f"synth: plan rows {lo}..{hi} asked out of turn (next: "
                                f"{self._next} of {self.height}); this is a bug in memframe")
        self._next = hi
        part = self._order_rows(lo, hi)
        # a conversation's number is its row of `convs`, a structured capsule's its row of
        # `struct` (null: not one): gathered, where a join would hash them all per chunk
        talk = self.convs.select("project", "author", "conversation_id").gather(part["conv"])
        made = self.struct.select("role", "no", pl.col("project").alias("s_project"),
                                  "parent_epic", "thread", "step").gather(part["srow"])
        rows = pl.concat([part, talk, made], how="horizontal").select(
            pl.int_range(lo, hi, dtype=pl.Int64).alias("pos"), pl.col("role").fill_null("plain"),
            "no", pl.coalesce("project", "s_project").alias("project"), "parent_epic", "thread",
            "step", pl.col("conv").cast(pl.Int64), pl.col("k").cast(pl.Int64),
            pl.col("author").fill_null(0), "conversation_id", "created_ns", "arrive_ns")
        return self._fill(rows)

    def _order_rows(self, lo: int, hi: int) -> pl.DataFrame:
        """Rows ``lo..hi`` of the order; the pieces before ``hi`` are let go."""
        if self._pieces is None:
            if self._chunk >= self.height:  # one chunk: nothing to let go early
                return self.order.slice(lo, hi - lo)
            # copies (gathered): a slice would keep the whole order alive
            self._pieces = collections.deque(
                self.order.gather(pl.int_range(at, min(at + self._chunk, self.height),
                                               eager=True))
                for at in range(0, self.height, self._chunk))
            self.order = self.order.clear()
        taken = []
        at = self._first
        for piece in self._pieces:
            if at >= hi:
                break
            if at + piece.height > lo:
                taken.append(piece.slice(max(lo - at, 0), hi - max(lo, at)))
            at += piece.height
        while self._pieces and self._first + self._pieces[0].height <= hi:
            self._first += self._pieces.popleft().height
        return pl.concat(taken, rechunk=True) if taken else self.order.clear()

    def _fill(self, rows: pl.DataFrame) -> pl.DataFrame:
        """Content, provenance and the other ingest columns for the planned rows."""
        n = rows.height
        u = dict(zip(_CONTENT_DRAWS, self._content.uniforms(n), strict=True))
        cdf, order = self._cdf, self._vocab_order
        vocab = pl.Series(VOCABULARY)
        comps = [(i, c) for i, (_, _, cs) in enumerate(PROJECTS) for c in cs]
        comp_frame = pl.DataFrame({"project": [i for i, _ in comps], "comp": [c for _, c in comps]})
        comp_frame = comp_frame.with_columns(
            pl.int_range(pl.len()).over("project").alias("ci"),
            pl.len().over("project").alias("nc"),
        )
        rows = rows.with_columns(
            vocab.gather(pl.Series(rows["pos"] % len(VOCABULARY))).alias("w1"),  # every word used
            *[_words(u[w], cdf, order).alias(w) for w in ("w2", "w3", "w4", "w5", "w6")],
            pl.Series(_VERBS).gather((u["verb"] * len(_VERBS)).cast(pl.Int64)).alias("verb"),
            pl.lit(u["comp"]).alias("u_comp"),
            _pick(u["kind"], _KIND_W).alias("kind_i"),
            _pick(u["source"], [w for _, w in _SOURCES]).alias("source_i"),
            pl.lit(u["auth"]).alias("u_auth"),
            (0.35 + pl.lit(u["conf"]) * 0.6).round(2).alias("confidence"),
            (pl.lit(u["detail"]) < 0.4).alias("has_detail"),
            pl.lit(u["valid"]).alias("u_valid"),
            pl.lit(u["valid_len"]).alias("u_valid_len"),
            (pl.lit(u["line"]) * 900 + 1).cast(pl.Int64).alias("line"),
            (pl.lit(u["sha"]) * 0xFFFFFFF).cast(pl.Int64).alias("sha"),
        )
        nc = comp_frame.group_by("project", maintain_order=True).agg(pl.len().alias("nc"))
        rows = (
            rows.join(nc, on="project", how="left", maintain_order="left")
            .with_columns((pl.col("u_comp") * pl.col("nc")).cast(pl.Int64).alias("ci"))
            .join(comp_frame.select("project", "ci", "comp"), on=["project", "ci"], how="left",
                  maintain_order="left")
        )
        project_names = pl.Series([p for p, _, _ in PROJECTS])
        source_names = pl.Series([s for s, _ in _SOURCES])
        rows = rows.with_columns(
            _lookup(project_names, pl.col("project")).alias("project_id"),
            pl.when(pl.col("role") == "plain").then(_lookup(source_names, pl.col("source_i")))
            .otherwise(pl.lit("conversation")).alias("source"),
            _lookup(_AUTHORS, pl.col("author")).alias("author_name"),
        ).with_columns(
            pl.when(pl.col("conversation_id").is_null() & (pl.col("source") == "conversation"))
            .then(pl.lit("note")).otherwise(pl.col("source")).alias("source"),
        )
        anchors = _per_case(rows, "source", "anchor", {
            "conversation": pl.concat_str([pl.lit("conv:"),
                                           pl.col("conversation_id").fill_null("threads"),
                                           pl.lit("#"), pl.col("k").fill_null(pl.col("pos"))]),
            "file": pl.concat_str([pl.lit("file:"), pl.col("project_id"), pl.lit("/"),
                                   pl.col("comp"), pl.lit("/"), pl.col("w1"), pl.lit(".py#L"),
                                   pl.col("line")]),
            "git-commit": pl.concat_str([pl.lit("git:"), pl.col("sha").cast(pl.String)]),
            "web": pl.concat_str([pl.lit("https://docs.example.com/"), pl.col("w1"), pl.lit("/"),
                                  pl.col("w2")]),
            "import": pl.concat_str([pl.lit("import:legacy/"), pl.col("pos")]),
            "note": pl.concat_str([pl.lit("note:"), pl.col("project_id")]),
        })
        rows = rows.with_columns(
            anchors,
            pl.when(pl.col("source") == "import").then(pl.lit("externally-imported"))
            .when(pl.col("source").is_in(["file", "git-commit"])).then(pl.lit("observed-fact"))
            .when(pl.col("u_auth") < 0.3).then(pl.lit("user-stated"))
            .otherwise(pl.lit("agent-inferred")).alias("authority_class"),
            (pl.col("source") == "import").alias("instruction_taint"),
            _lookup(_KINDS, pl.col("kind_i")).alias("plain_kind"),
        )
        if self.noise:  # mixed case, plurals and content typos in the word slots of plain rows
            rows = _noisy_words(self.seed, rows, self._noise_words.uniforms(n))
        # content, one template per (role, kind), each computed on its own rows only
        serial = pl.concat_str([pl.lit(" (ref "), pl.col("pos") + 1, pl.lit(")")])
        detail = pl.when(pl.col("has_detail")).then(_template_expr(_DETAIL)).otherwise(pl.lit(""))
        thread = _lookup(THREADS, pl.col("thread").fill_null(0) % len(THREADS))
        cases: dict[str | None, pl.Expr] = {
            f"plain:{kind}": pl.concat_str([_template_expr(pieces), serial, detail])
            for kind, pieces in _TEMPLATES.items()
        }
        cases["epic"] = pl.concat_str([
            pl.lit("Epic: "), pl.col("verb"), pl.lit(" the "), pl.col("w1"), pl.lit(" "),
            pl.col("w2"), pl.lit(" ("), pl.col("project_id"), pl.lit(")"), serial,
            pl.lit("\nGoal: every "), pl.col("w3"), pl.lit(" ships with a "), pl.col("w4"),
            pl.lit(" check")])
        cases["task"] = pl.concat_str([
            pl.lit("Task: "), pl.col("verb"), pl.lit(" "), pl.col("w1"), pl.lit(" "), pl.col("w2"),
            pl.lit(" for the "), pl.col("w3"), serial])
        cases["thread"] = pl.concat_str([
            pl.lit("ACTIVE("), thread, pl.lit("): step "), pl.col("step") + 1, pl.lit(" - "),
            pl.col("verb"), pl.lit(" the "), pl.col("w1"), pl.lit(" "), pl.col("w2"), serial,
            pl.lit("\nnext: check the "), pl.col("w3"), pl.lit(" "), pl.col("w4")])
        cases["close"] = pl.concat_str([
            pl.lit("Closed thread "), thread, pl.lit(": the "), pl.col("w1"),
            pl.lit(" work landed"), serial])
        rows = rows.with_columns(
            pl.when(pl.col("role") == "plain")
            .then(pl.concat_str([pl.lit("plain:"), pl.col("plain_kind").fill_null("None")]))
            .otherwise(pl.col("role")).alias("template"))
        rows = rows.with_columns(
            _per_case(rows, "template", "content", cases),
            # ingest-time kind for half of the plain rows; epics/tasks are classified later
            pl.when((pl.col("role") == "plain") & (pl.col("u_auth") * 7 % 1 < 0.5))
            .then(pl.col("plain_kind")).otherwise(None).alias("kind"),
        )
        if self.noise:
            rows = rows.with_columns(_noise_tail(rows, self._noise.take(n)))
        rows = rows.with_columns(
            rfc3339(pl.col("created_ns").cast(_TS)).alias("created_at"),
            pl.when(pl.col("u_valid") < 0.04)
            .then((pl.col("created_ns") + (1 + pl.col("u_valid_len") * 44).cast(pl.Int64) * _DAY_NS)
                  .cast(_TS))
            .otherwise(None).alias("valid_to"),
        )
        return rows.select(
            "pos", "role", "no", "project", "parent_epic", "thread", "step", "conv",
            "created_ns", "arrive_ns", "content", "source", "anchor", "project_id", "kind",
            "confidence", "created_at", "valid_to", "authority_class", "instruction_taint",
            "conversation_id", pl.col("author_name").alias("author"), "w1",
        )


def _capsule_plan(seed: int, params: SynthParams, clock_start: datetime.datetime,
                  dag_cycle: bool, noise: bool = False) -> pl.DataFrame:
    """Every capsule the store will ingest in bulk, in ingest order (column ``pos``): the
    whole `_Plan` at once."""
    plan = _Plan(seed, params, clock_start, dag_cycle, noise)
    return plan.rows(0, plan.height)


def _session_plan(seed: int, params: SynthParams,
                  clock_start: datetime.datetime) -> pl.DataFrame:
    """Bracket sessions: project, start/finish instants, handoff text (or null)."""
    rng = _rng(seed, "sessions")
    start = _ns(clock_start)
    span = params.span_days * _DAY_NS
    rows = []
    for s in range(params.sessions):
        p = rng.choices(range(len(PROJECTS)), [w for _, w, _ in PROJECTS])[0]
        t0 = start + int(rng.random() * 0.97 * span)
        t1 = min(t0 + int((0.3 + rng.random() * 4) * 3600 * _NS), start + span - _NS)
        # about one in seven left open, one in nine closed without a handoff
        status = "open" if s % 7 == 3 else ("closed" if s % 9 == 5 else "handoff")
        w = rng.sample(VOCABULARY, 4)
        verb = rng.choice(_VERBS)
        handoff = (f"Handoff {s + 1}: finished the {w[0]} {w[1]} work in {PROJECTS[p][0]}.\n"
                   f"Next: {verb} the {w[2]} before touching the {w[3]}."
                   if status == "handoff" else None)
        rows.append((s, PROJECTS[p][0], t0, None if status == "open" else t1, handoff))
    return pl.DataFrame(rows, orient="row", schema={
        "session": pl.Int64, "project_id": pl.String, "start_ns": pl.Int64,
        "finish_ns": pl.Int64, "handoff": pl.String})


# ---- writing -----------------------------------------------------------------------------

class _Clock:
    """The store's injected clock; synthesis moves it forward as the timeline advances."""

    def __init__(self, ns: int):
        self.ns = ns

    def set(self, ns: int) -> None:
        self.ns = max(self.ns, ns)

    def __call__(self) -> datetime.datetime:
        return _dt(self.ns)


def _progress(enabled: bool, total: int) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, unit="capsule", desc="synth", leave=False)


def synthesize(
    path: str | Path,
    *,
    capsules: int = 3000,
    seed: int = 0,
    clock_start: datetime.datetime = DEFAULT_CLOCK_START,
    dag_cycle: bool = False,
    chunk_rows: int = 100_000,
    progress: bool = False,
    noise: bool = False,
    misses: int | None = None,
    receipts: int | None = None,
    recall_tables: bool = True,
) -> Store:
    """Write a realistic synthetic store of exactly ``capsules`` capsules at ``path``.

    The same arguments always give the same tables (row for row, seq for seq); only
    partition file names differ between two runs.

    The capsules are made and written a chunk at a time (`_CHUNK_CAPSULES`, or what the
    memory budget allows: `memframe.budget`), and so are the recall counts and the
    recall receipts: what a chunk holds does not grow with the store. What does is what
    the event tables need of every capsule (compact columns) and the journaled event
    tables, each written in one commit: about `_STORE_BYTES` a capsule in all. The
    chunks never change the tables; the recall receipts land in commits of one partition
    file's rows each, so a store of over half a million capsules has a few more
    generations.

    Args:
        path: a new or empty directory.
        capsules: how many capsules the store holds (at least 200).
        seed: selects the store; any int.
        clock_start: the first instant of the timeline (aware datetime). The timeline
            spans 4 weeks to a year depending on ``capsules``.
        dag_cycle: also add one small blocks-cycle (3 tasks) to the DAG.
        chunk_rows: the most capsules one ingest commit carries.
        progress: show a progress bar (tqdm) while writing.
        noise: also write what real stores hold besides words (see `noisy content`
            below); off by default, so existing seeds keep their stores.
        misses: how many recall-miss rows to write (default: a share of ``capsules``,
            see `SynthParams`).
        receipts: about how many recall receipts to write (default: one per two
            capsules).
        recall_tables: write the nMEMORY 0.3.0 tables (recall receipts, event times,
            epistemics) with known answers (see `recall_truth`); off, the store is the one
            this function wrote before it planted them.

    Noisy content: plain capsules gain UUID and commit-hash references, id-like tokens
    (``cap-12``, ``sess-3``, ``PR #40``, ``node_7``, versions), numbers and units, code
    identifiers built from the words (``snake_case``, ``camelCase``, ``Pascal``,
    ``dotted.calls()``), mixed case, phrases with Latin diacritics, plurals of the words
    and a few misspelled words. `miss_truth` with the same ``noise`` stays exact.

    Returns:
        The new store, opened with the system clock.

    Raises:
        MemoryBudgetError: under a memory budget (``mf.memory_limit``,
            ``MEMFRAME_MEMORY_LIMIT``) too small for one chunk at this size; nothing is
            written.

    Examples:
        >>> import tempfile, os
        >>> from memframe.synth import synthesize
        >>> store = synthesize(os.path.join(tempfile.mkdtemp(), "s"), capsules=400, seed=1)
        >>> store.table("capsules").select(pl.len()).collect().item()
        400
    """
    if clock_start.tzinfo is None:
        raise InvalidInputError("clock_start must be an aware datetime (e.g. tzinfo=UTC)")
    params = _params(capsules, misses, receipts)
    start = _ns(clock_start)
    end = start + params.span_days * _DAY_NS
    chunk = _chunk_capsules(params, chunk_rows)  # before anything is written
    plan = _Plan(seed, params, clock_start, dag_cycle, noise, chunk)
    sessions = _session_plan(seed, params, clock_start)
    windows, width = _windows(plan.order, start, end, chunk_rows)
    # the timeline's windows are runs of the plan: it is in arrival order
    bounds = [0, *plan.order["arrive_ns"].search_sorted(
        pl.Series([start + w * width for w in range(1, windows)], dtype=pl.Int64),
        side="left").to_list(), plan.height]
    handoff_plan = (_handoff_plan(plan.order, sessions, start, end, chunk_rows)
                    if recall_tables else None)
    clock = _Clock(start)
    store = Store.create(path, clock=clock)
    bar = _progress(progress, params.capsules)
    handoffs_done = 0

    # -- the timeline: windows of capsules, sessions in between ---------------------------
    events = sorted(
        [(int(r["start_ns"]), 0, r["session"]) for r in sessions.iter_rows(named=True)]
        + [(int(r["finish_ns"]), 1, r["session"]) for r in sessions.iter_rows(named=True)
           if r["finish_ns"] is not None]
        + [(end - days * _DAY_NS, 2, i) for i, days in enumerate((9, 5, 2))]
    )
    scan_rng = _rng(seed, "scans")
    sids: dict[int, str] = {}
    handoff_ids: dict[int, str] = {}
    written = _Written(noise)
    chunks = _Chunks(plan, chunk)
    ev = iter(events)
    pending = next(ev, None)
    ingest_cols = ["content", "source", "anchor", "project_id", "kind", "confidence",
                   "created_at", "valid_to", "authority_class", "instruction_taint",
                   "conversation_id", "author"]
    with tempfile.TemporaryDirectory(prefix="memframe-synth-") as spill:
        for w in range(windows):
            w_end = start + (w + 1) * width
            while pending is not None and pending[0] < w_end:
                t, what, s = pending
                clock.set(t)
                if what == 2:
                    _git_scan(store, scan_rng, s, written.anchored())
                    pending = next(ev, None)
                    continue
                row = sessions.row(s, named=True)
                if what == 0:
                    sids[s] = store.session_start(row["project_id"])
                else:
                    hid = store.session_finish(sids[s], handoff=row["handoff"])
                    if hid is not None:
                        handoff_ids[s] = hid
                        handoffs_done += 1
                pending = next(ev, None)
            clock.set(min(w_end, end))
            for lo in range(bounds[w], bounds[w + 1], chunk_rows):
                rows = chunks.rows(lo, min(lo + chunk_rows, bounds[w + 1]))
                ids = pl.Series("id", store.ingest(rows.select(ingest_cols)), dtype=pl.String)
                written.add(rows, ids, Path(spill))
                if bar is not None:
                    # handoffs are counted with the next chunk: one commit each, they are
                    # slow per capsule, and a bar that counted them alone would first
                    # estimate hours
                    bar.update(rows.height + handoffs_done)
                handoffs_done = 0
                del rows
        del chunks
        if written.height != plan.height:
            raise MemframeError("synthetic contents collided; this is a bug in memframe.synth")
        if handoff_plan is not None and dict(
                handoff_plan.select("session", "id").iter_rows()) != handoff_ids:
            # recall_truth finds every id from the plan: the handoffs are where ids interleave
            raise MemframeError("synthetic handoff ids differ from the timeline's; this is a "
                                "bug in memframe.synth")
        convs = plan.convs.select("conv", "conversation_id")
        del plan
        clock.set(end)

        def stage(text: str) -> None:
            # the capsules are written; the bar says which table it is on while the events
            # go (the last seconds of a large synth), so it never sits still without a word
            if bar is not None:
                bar.set_description(f"synth: {text}")

        _write_events(store, written.frame(), written.structured(), convs, written.anchors,
                      sessions, handoff_ids,
                      params, seed, start, end, clock, chunk, noise, recall_tables, stage)
    if bar is not None:
        bar.update(params.rollups + handoffs_done)
        bar.close()
    return Store.open(path)


def _chunk_capsules(params: SynthParams, chunk_rows: int) -> int:
    """Capsules per chunk of `synthesize` (`_CHUNK_CAPSULES`, or what the memory budget
    allows; at least one ingest commit's rows)."""
    return budget.chunk_rows(
        default=_CHUNK_CAPSULES, per_row=_CHUNK_BYTES, smallest=min(chunk_rows, params.capsules),
        fixed=_FIXED_BYTES + _STORE_BYTES * params.capsules, what="memframe synth")


class _Chunks:
    """The plan's rows for consecutive ingest commits, filled ``chunk`` rows at a time
    (a commit's rows may span two chunks; one larger than a chunk is filled whole)."""

    def __init__(self, plan: _Plan, chunk: int):
        self._plan = plan
        self._chunk = chunk
        self._rows: pl.DataFrame | None = None
        self._lo = 0  # the plan row the held rows start at

    def rows(self, lo: int, hi: int) -> pl.DataFrame:
        """Plan rows ``lo..hi`` (``lo``: where the previous call stopped)."""
        held = self._rows
        top = self._lo + (0 if held is None else held.height)
        if hi > top:
            fresh = self._plan.rows(top, min(self._plan.height, max(hi, top + self._chunk)))
            held = fresh if held is None else pl.concat([held.slice(lo - self._lo), fresh])
            self._rows, self._lo = held, lo
        assert held is not None
        return held.slice(lo - self._lo, hi - lo)


class _Written:
    """What the events need of the capsules written so far, compact (`add`): per capsule
    its number (the id is ``cap-<number>``, formatted only for the rows a table writes) and
    plan columns, the low-cardinality text as enums (a byte or two each); the anchors go
    to Arrow files in a spill directory (epistemics read a few back)."""

    def __init__(self, noise: bool = False) -> None:
        self._parts: list[pl.DataFrame] = []
        self._structured: list[pl.DataFrame] = []  # the few capsules that are not plain
        self._spills: list[Path] = []
        self._last = 0  # the highest capsule number written
        self.height = 0
        self._enums = _written_enums(noise)

    def add(self, rows: pl.DataFrame, ids: pl.Series, spill: Path) -> None:
        """Keep what the events need of ``rows``, ingested as ``ids``."""
        numbers = ids.str.strip_prefix("cap-").cast(pl.Int64, strict=False)
        # fresh contents take new numbers in row order: any other answer is a collision
        if (ids.len() != rows.height or numbers.null_count()
                or (numbers.len() and (numbers[0] <= self._last
                                       or (numbers.diff().drop_nulls() <= 0).any()))):
            raise MemframeError("synthetic contents collided; this is a bug in memframe.synth")
        self._last = int(numbers[-1]) if numbers.len() else self._last
        self.height += rows.height
        # no pos (the row's place) and no project_id (the project's name): both derived;
        # the structured capsules' own columns are kept for those rows only
        self._structured.append(rows.with_columns(numbers.alias("num")).filter(
            pl.col("role") != "plain").select(
            "pos", "num", "role", "no", "parent_epic", "thread", "step", "project",
            "created_ns"))
        self._parts.append(rows.select(
            numbers.alias("num"), pl.col("role").cast(self._enums["role"]),
            pl.col("project").cast(pl.Int8), pl.col("conv").cast(pl.Int32), "created_ns",
            *[pl.col(c).cast(self._enums[c]) for c in ("source", "kind", "authority_class",
                                                       "w1")]))
        path = spill / f"anchors-{len(self._spills)}.arrow"
        rows.select(ids, "anchor").write_ipc(path)  # uncompressed: read once, soon
        self._spills.append(path)

    def structured(self) -> pl.DataFrame:
        """The structured capsules written (epics, tasks, thread rows), in write order:
        ``pos``, ``num``, ``role``, ``no``, ``parent_epic``, ``thread``, ``step``,
        ``project``, ``created_ns``."""
        return pl.concat(self._structured)

    def anchored(self) -> pl.Series:
        """The ids of the file and git-commit capsules so far, in write order."""
        if not self._parts:
            return pl.Series("id", [], dtype=pl.String)
        return pl.concat([p.filter(pl.col("source").is_in(["file", "git-commit"]))
                          .select(_cap(pl.col("num")).alias("id"))["id"] for p in self._parts])

    def frame(self) -> pl.DataFrame:
        """Every capsule written, in write order (the plan's ``pos`` order): ``num``, the
        capsule's number, and the plan columns the events read."""
        frame = pl.concat(self._parts)
        self._parts = []
        # one chunk a column, made a column at a time (never a second copy of the whole):
        # the events add single-chunk columns beside these, and Polars' string formatting
        # fails on a frame whose columns are cut in different places
        for name in frame.columns:
            frame = frame.with_columns(frame.get_column(name).rechunk())
        self._parts = [frame]
        return frame

    def anchors(self, ids: pl.Series) -> pl.DataFrame:
        """``id`` and ``anchor`` of the capsules ``ids`` names, read from the spill a file
        at a time (a scan of every file buffers far more than the few rows it keeps)."""
        keep = ids.implode()
        parts = [pl.read_ipc(path).filter(pl.col("id").is_in(keep)) for path in self._spills]
        return (pl.concat(parts) if parts
                else pl.DataFrame(schema={"id": pl.String, "anchor": pl.String}))


def _cap(num: pl.Expr) -> pl.Expr:
    """The capsule id ``cap-<num>`` of capsule numbers."""
    return pl.format("cap-{}", num)


def _cap_order(num: pl.Expr) -> pl.Expr:
    """A number per capsule number that sorts as its id ``cap-<num>`` does as text (digit
    by digit: ``cap-10`` before ``cap-9``), without making the text: the number padded
    with zeros to 17 digits, then its own digit count (a prefix goes first)."""
    num = num.cast(pl.Int64)
    digits, padded = pl.lit(1, dtype=pl.Int64), num
    for k in range(1, 17):
        short = num < 10**k
        digits = digits + (~short).cast(pl.Int64)
        padded = padded * pl.when(short).then(10).otherwise(1)
    return padded * 32 + digits


def _project_name(project: pl.Expr) -> pl.Expr:
    """The project id of a project's number."""
    return _lookup([p for p, _, _ in PROJECTS], project)


@functools.lru_cache(maxsize=2)
def _written_enums(noise: bool) -> dict[str, pl.Enum]:
    """The closed vocabularies of the text columns `_Written` keeps, as enums."""
    words = list(VOCABULARY)
    if noise:  # `_noisy_words` title-cases or upper-cases some w1
        words += [w.title() for w in VOCABULARY] + [w.upper() for w in VOCABULARY]
    return {
        "role": pl.Enum(["plain", "epic", "task", "thread", "close"]),
        "source": pl.Enum([s for s, _ in _SOURCES]),
        "kind": pl.Enum([k for k in _KINDS if k is not None]),
        "authority_class": pl.Enum(["externally-imported", "observed-fact", "user-stated",
                                    "agent-inferred"]),
        "w1": pl.Enum(list(dict.fromkeys(words))),
    }


def _git_scan(store: Store, rng: random.Random, i: int, anchored: pl.Series) -> None:
    """One scan of a repository: advance its cursor, record a few verdicts on the file and
    git-commit capsules written so far (``anchored``, their ids)."""
    sample = [anchored[int(rng.random() * anchored.len())] for _ in range(3)]
    store.record_git_scan(_REPOS[i % 2 if i < 2 else 0], f"{rng.getrandbits(160):040x}", [
        {"capsule_id": cid, "kind": "anchor_path", "ref": f"scan-{i}/{j}",
         "verdict": ("corroborated", "drifted", "missing")[j % 3]}
        for j, cid in enumerate(sample)])


def _ids_of(plan: pl.DataFrame, role: str) -> pl.DataFrame:
    return plan.filter(pl.col("role") == role)


def _structured_of(plan: pl.DataFrame, roles: list[str]) -> pl.DataFrame:
    """The plan's rows of ``roles`` (a few thousand at most), their numbers as Int64 (the
    rows `_Written` keeps hold them narrower), with their ids."""
    return plan.filter(pl.col("role").is_in(roles)).with_columns(
        pl.col("no", "parent_epic", "thread", "step").cast(pl.Int64),
        _cap(pl.col("num")).alias("id"))


def _fates(rng: random.Random, params: SynthParams, plain: pl.DataFrame,
           tasks: pl.DataFrame) -> tuple[list[list[str]], pl.DataFrame, pl.Series]:
    """Who is absorbed into a rollup (``members``), who is forgotten and how (``forgets``),
    and the forgotten capsules' numbers (``gone``): the first draws of the ``events``
    stream. ``plain`` and ``tasks`` hold each capsule's number (``num``)."""
    n_plain = plain.height
    u_forget = _uniform(rng, n_plain)
    conv_sizes = (plain.select("conv", "num").filter(pl.col("conv").is_not_null())
                  .group_by("conv", maintain_order=True).agg(pl.col("num").head(4),
                                                             pl.len().alias("n"))
                  .filter(pl.col("n") >= 4).sort("conv"))
    members: list[list[str]] = []
    absorbed: list[int] = []
    for k in sorted(rng.sample(range(conv_sizes.height), params.rollups)):
        nums = conv_sizes.row(k, named=True)["num"]
        members.append([f"cap-{n}" for n in nums])
        absorbed += nums
    max_erase = _clamp(n_plain // 200, 6, 200)  # erasing rewrites a partition: keep few
    forgets = (
        plain.select("num", "pos", "created_ns").with_columns(pl.lit(u_forget).alias("u"))
        .filter((pl.col("u") < 0.015) & ~pl.col("num").is_in(absorbed))
        .with_columns(pl.int_range(pl.len()).alias("k"))
        .with_columns(
            pl.when(pl.col("k") % 8 == 6).then(pl.lit("purge"))
            .when(pl.col("k") % 8 == 3).then(pl.lit("redact"))
            .otherwise(pl.lit("tombstone")).alias("mode")
        )
    )
    erasing = forgets.filter(pl.col("mode") != "tombstone").head(max_erase)
    forgets = pl.concat([forgets.filter(pl.col("mode") == "tombstone"), erasing]).sort("pos")
    forgets = forgets.select("num", "pos", "created_ns", "mode")
    if tasks.height > 10:  # one planned task was dropped: dead to the dag
        dropped = tasks.slice(tasks.height // 2, 1).select(
            "num", pl.col("pos").cast(forgets["pos"].dtype), "created_ns",
            pl.lit("tombstone").alias("mode"))
        forgets = pl.concat([forgets, dropped])
    forgets = forgets.with_columns(_cap(pl.col("num")).alias("id"))
    gone = forgets["num"]

    return members, forgets, gone


def _write_events(store: Store, plan: pl.DataFrame, structured: pl.DataFrame,
                  convs: pl.DataFrame,
                  anchors: Callable[[pl.Series], pl.DataFrame], sessions: pl.DataFrame,
                  handoff_ids: dict[int, str],
                  params: SynthParams, seed: int, start: int, end: int, clock: _Clock,
                  chunk: int, noise: bool = False, recall_tables: bool = False,
                  stage: Any = lambda text: None) -> None:
    """The event tables, from ``plan``: every capsule written, in write order, with the
    columns `_Written` keeps; ``structured``: the epics, tasks and thread rows among them
    with their own columns (`_Written.structured`); ``convs``: ``conv`` and
    ``conversation_id``; ``anchors``:
    ``id`` and ``anchor`` of the capsules a series of ids names; ``chunk``: how many
    capsules' draws to hold at a time."""
    rng = _rng(seed, "events")
    stage("choosing what is forgotten and absorbed")
    plan = plan.with_row_index("pos")
    # columns picked before the rows: a filter copies every column it keeps
    plain = plan.select("role", "num", "pos", "project", "conv", "created_ns", "source",
                        "authority_class", "kind").filter(pl.col("role") == "plain").drop("role")
    epics = _structured_of(structured, ["epic"]).sort("no")
    tasks = _structured_of(structured, ["task"]).sort("no")
    threads = _structured_of(structured, ["thread", "close"]).sort("thread", "step")
    del structured

    # -- who gets forgotten, absorbed (decided first: recalls avoid them) -----------------
    members, forgets, gone = _fates(rng, params, plain, tasks)

    # -- classifications: epics, tasks, later labels, re-labels ----------------------------
    stage("classifications")
    store.append("classifications", _classifications(rng, plain, epics, tasks, end))

    # -- tiers: old capsules archived, tainted imports quarantined, a few restored ---------
    stage("tiers")
    store.append("tiers", _tiers(rng, plain, gone, end))

    # -- relations -------------------------------------------------------------------------
    stage("relations")
    relations = _relations(rng, params, plan, plain, epics, tasks, threads, sessions,
                           handoff_ids, end)
    store.append("relations", relations)
    superseded = (relations.filter(pl.col("kind") == "supersedes")["to_id"]
                  .str.strip_prefix("cap-").cast(pl.Int64))
    del relations  # each table's frames go once it is written: the next one needs the room
    # the rest of the events stream's draws, in its order: the lane overrides and the
    # corroborations (written in their turn below), so that every plain capsule's row
    # goes before the recalls
    u_lane, u_at = _uniform(rng, params.lane_overrides), _uniform(rng, params.lane_overrides)
    corroborations = _corroborations(rng, plain, end)
    del plain

    # -- recalls: Zipf over live capsules, aggregated per capsule and day ------------------
    stage("recalls")
    recalls, popular = _recalls(seed, plan, gone, params, end, chunk)
    store.append("recalls", recalls)
    recalled = recalls["capsule_id"].str.strip_prefix("cap-").cast(pl.Int64).unique()
    del recalls

    # -- recall misses (ground truth in miss_truth) ----------------------------------------
    stage("recall misses")
    misses = _miss_plan(seed, params, _dt(start), noise)
    bulk, verb = misses.head(misses.height - 2), misses.tail(2)
    store.append("recall_misses", bulk.select("at", "term", "outcome"))
    store.record_miss([verb["term"][0].capitalize(), "Café"], "abstain")

    # -- lane overrides --------------------------------------------------------------------
    stage("lane overrides")
    lanes = pl.DataFrame({"li": pl.select(_pick(u_lane, _LANE_W)).to_series(),
                          "at_ns": (start + u_at * (end - start)).cast(pl.Int64)}).sort("at_ns")
    store.append("lane_overrides", lanes.select(
        pl.col("at_ns").cast(_TS).alias("at"),
        _lookup([f for f, _ in _LANES], pl.col("li")).alias("forced"),
        _lookup([a for _, a in _LANES], pl.col("li")).alias("auto_pick")))

    # -- git witness: bulk corroborations (the cursor scans ran on the timeline) -----------
    stage("corroborations")
    store.append("corroborations", corroborations)
    del corroborations
    # -- summaries the language seam returned for some conversations -----------------------
    stage("summaries")
    store.append("summaries", _summaries(plan, convs, end))
    del convs

    # -- rollups (abstract) ----------------------------------------------------------------
    stage("rollups (abstract)")
    firsts = [int(ms[0].removeprefix("cap-")) for ms in members]
    project_of = {f"cap-{num}": PROJECTS[project][0] for num, project in plan.filter(
        pl.col("num").is_in(firsts)).select("num", "project").iter_rows()}
    for r, ms in enumerate(members):
        store.memory.abstract(
            ms, _rollup_text(r, len(ms)),
            source="abstract", anchor=f"rollup:{ms[0]}", project_id=project_of[ms[0]])

    # -- forgets last ----------------------------------------------------------------------
    stage("forgets")
    reasons = pl.Series(_FORGET_REASONS)
    erase_reasons = pl.Series(_ERASE_REASONS)
    store.append("forgets", forgets.select(
        (pl.col("created_ns") + 2 * _DAY_NS).clip(None, end).cast(_TS).alias("at"),
        pl.col("id").alias("capsule_id"), "mode",
        pl.when(pl.col("mode") == "tombstone")
        .then(_lookup(reasons, pl.col("pos") % reasons.len()))
        .otherwise(_lookup(erase_reasons, pl.col("pos") % erase_reasons.len())).alias("reason"),
    ).sort("at", "capsule_id"))

    # -- the nMEMORY 0.3.0 tables, with known answers (recall_truth) -----------------------
    if recall_tables:
        stage("recall receipts, event times, epistemics, taught aliases")
        popularity = [popular]  # handed over: the receipts keep their own copy of it
        del popular
        absorbed = pl.Series([int(m.removeprefix("cap-")) for ms in members for m in ms],
                             dtype=pl.Int64)
        receipts, extra = _recall_tables(
            seed, params, plan, gone, absorbed, superseded, recalled,
            popularity, misses, start, end, anchors, chunk)
        # the receipts keep what they need of these: the rest goes before they are written
        del recalled, superseded
        # a piece per commit: one commit of them all would hold every receipt at once
        for piece in receipts:
            store.append("recall_receipts", piece.drop("source"))
        store.append("event_times", extra["event_times"])
        store.append("epistemics", extra["epistemics"])
        store.append("recall_aliases", _alias_plan(seed, misses, end))


def _classifications(rng: random.Random, plain: pl.DataFrame, epics: pl.DataFrame,
                     tasks: pl.DataFrame, end: int) -> pl.DataFrame:
    """Classification rows: epics, tasks, later labels of unlabelled plain capsules and
    re-labels of labelled ones (the ``events`` stream's uniforms of the plain capsules)."""
    u_cls = _uniform(rng, plain.height)
    plain = plain.select("num", "pos", "created_ns", "kind")
    later = plain.with_columns(pl.lit(u_cls).alias("u")).filter(
        pl.col("kind").is_null() & (pl.col("u") < 0.3))
    relabel = plain.with_columns(pl.lit(u_cls).alias("u")).filter(
        pl.col("kind").is_not_null() & (pl.col("u") > 0.98))
    kinds = pl.Series([k for k in _KINDS if k is not None])
    pos = pl.col("pos").cast(pl.Int64)
    cls = pl.concat([
        epics.select("num", "created_ns", pl.lit("epic").alias("kind")),
        tasks.select("num", "created_ns", pl.lit("task").alias("kind")),
        later.select("num", "created_ns",
                     _lookup(kinds, (pos * 7 + 3) % kinds.len()).alias("kind")),
        relabel.select("num", "created_ns", _lookup(kinds, (pos * 5 + 1) % kinds.len())
                       .alias("kind")),
    ]).with_columns(
        (pl.col("created_ns") + (pl.col("created_ns") % 7200) * _NS).clip(None, end).alias("at_ns"),
        pl.when(pl.col("created_ns") % 20 == 0).then(pl.lit("global"))
        .when(pl.col("created_ns") % 20 == 1).then(pl.lit("session"))
        .otherwise(pl.lit("project")).alias("scope"),
    ).sort(pl.col("at_ns"), _cap_order(pl.col("num")))
    return cls.select(pl.col("at_ns").cast(_TS).alias("at"),
                      _cap(pl.col("num")).alias("capsule_id"), "kind", "scope")


def _tiers(rng: random.Random, plain: pl.DataFrame, gone: pl.Series, end: int) -> pl.DataFrame:
    """Tier rows: old capsules archived, tainted imports quarantined, a few restored
    (``gone``: the forgotten capsules' numbers)."""
    u_tier = _uniform(rng, plain.height)
    tier_base = plain.select("num", "created_ns", "authority_class").with_columns(
        pl.lit(u_tier).alias("u")).filter(~pl.col("num").is_in(gone.implode()))
    archived = tier_base.filter((pl.col("created_ns") < end - 21 * _DAY_NS) & (pl.col("u") < 0.07))
    quarantined = tier_base.filter((pl.col("authority_class") == "externally-imported")
                                   & (pl.col("u") > 0.6))
    restored = archived.filter(pl.col("u") < 0.004)
    tiers = pl.concat([
        archived.select("num", (pl.col("created_ns") + 14 * _DAY_NS).alias("at_ns"),
                        pl.lit("archived").alias("tier")),
        quarantined.select("num", (pl.col("created_ns") + _DAY_NS).alias("at_ns"),
                           pl.lit("quarantined").alias("tier")),
        restored.select("num", (pl.col("created_ns") + 20 * _DAY_NS).alias("at_ns"),
                        pl.lit("active").alias("tier")),
    ]).with_columns(pl.col("at_ns").clip(None, end)).sort(pl.col("at_ns"),
                                                          _cap_order(pl.col("num")))
    return tiers.select(pl.col("at_ns").cast(_TS).alias("at"),
                        _cap(pl.col("num")).alias("capsule_id"), "tier")


def _summaries(plan: pl.DataFrame, convs: pl.DataFrame, end: int) -> pl.DataFrame:
    """Summaries the language seam returned for some conversations of five capsules or
    more (``convs``: ``conv`` and ``conversation_id``)."""
    talks = (plan.select("conv", "created_ns", "project").filter(pl.col("conv").is_not_null())
             .group_by("conv")
             .agg(pl.col("created_ns").max(), _project_name(pl.col("project").first())
                  .alias("project_id"), pl.len().alias("n"))
             .join(convs, on="conv")
             .filter(pl.col("conversation_id").is_not_null() & (pl.col("n") >= 5))
             .sort("created_ns", "conversation_id"))
    picked = talks.gather_every(max(1, talks.height // 40))
    return picked.select(
        (pl.col("created_ns") + 3600 * _NS).clip(None, end).cast(_TS).alias("at"),
        "conversation_id",
        pl.concat_str([pl.lit("Summary: "), pl.col("n"), pl.lit(" notes in "),
                       pl.col("project_id").cast(pl.String), pl.lit(" about "),
                       _lookup(VOCABULARY, pl.col("n") % len(VOCABULARY))])
        .alias("summary"))


def _revisions(plain: pl.DataFrame, u_rev: pl.Series, u_back: pl.Series) -> pl.DataFrame:
    """Supersede edges among plain capsules of one project (capsule numbers ``from_num``,
    ``to_num``): about one in twenty-two revises a note up to 30 places back."""
    # the rows of each project in order, one project after another: a revision's target
    # is found by its place there (a join would hash every capsule)
    by_project = plain.select(pl.arg_sort_by("project", maintain_order=True)).to_series()
    ranked = plain.select("num", "project", pl.int_range(pl.len()).over("project").alias("rank"))
    counts = ranked.group_by("project").len().sort("project")
    first = dict(zip(counts["project"].to_list(),
                     itertools.accumulate([0, *counts["len"].to_list()]), strict=False))
    revisions = ranked.with_columns(
        pl.lit(u_rev).alias("u"), (pl.lit(u_back) * 30 + 1).cast(pl.Int64).alias("back"),
    ).filter(pl.col("u") < 0.045).with_columns(
        (pl.col("rank") - pl.col("back")).alias("target_rank")
    ).filter(pl.col("target_rank") >= 0)
    start = revisions["project"].replace_strict(first, return_dtype=pl.Int64)
    target = by_project.gather(start + revisions["target_rank"])
    return pl.DataFrame({"from_num": revisions["num"],
                         "to_num": plain["num"].gather(target)})


def _rollup_text(r: int, members: int) -> str:
    return (f"Rollup {r + 1}: {members} notes on {VOCABULARY[(r * 37) % len(VOCABULARY)]} "
            f"folded into one")


def _relations(rng: random.Random, params: SynthParams, plan: pl.DataFrame, plain: pl.DataFrame,
               epics: pl.DataFrame, tasks: pl.DataFrame, threads: pl.DataFrame,
               sessions: pl.DataFrame, handoff_ids: dict[int, str], end: int) -> pl.DataFrame:
    # the edges join capsule numbers (``from_num``, ``to_num``); the ids are made for the
    # rows written, after they are sorted
    edges: list[pl.DataFrame] = []

    def add(frame: pl.DataFrame, kind: str) -> None:
        edges.append(frame.select(pl.col("from_num").cast(pl.Int64),
                                  pl.col("to_num").cast(pl.Int64), pl.lit(kind).alias("kind")))

    # supersede chains among plain capsules of one project: revisions of earlier notes
    u_rev, u_back = _uniform(rng, plain.height), _uniform(rng, plain.height)
    add(_revisions(plain, u_rev, u_back), "supersedes")
    del u_rev, u_back
    # thread handoffs: each update supersedes the previous one (one thread forgot to)
    th = threads.with_columns(pl.col("num").shift(1).over("thread").alias("prev"))
    chained = th.filter(pl.col("prev").is_not_null() & ~((pl.col("thread") == 1)
                                                        & (pl.col("step") == 1)))
    add(chained.select(pl.col("num").alias("from_num"), pl.col("prev").alias("to_num")),
        "supersedes")
    # one bracket handoff corrected by the project's next handoff (stays visible, flagged)
    by_project: dict[str, list[int]] = {}
    for s, project in sessions.select("session", "project_id").iter_rows():
        if s in handoff_ids:
            by_project.setdefault(project, []).append(int(handoff_ids[s].removeprefix("cap-")))
    pairs = [(hs[1], hs[0]) for _, hs in sorted(by_project.items()) if len(hs) >= 2][:1]
    if pairs:
        add(pl.DataFrame(pairs, orient="row", schema={"from_num": pl.Int64, "to_num": pl.Int64}),
            "supersedes")
    # missions: sub-epics and tasks grounded in epics; half the threads grounded too
    epic_nums = dict(enumerate(epics["num"].to_list()))

    def epic(index: pl.Expr) -> pl.Expr:
        return index.cast(pl.Int64).replace_strict(epic_nums, return_dtype=pl.Int64,
                                                   default=None)

    sub = epics.filter(pl.col("parent_epic").is_not_null())
    add(sub.select(pl.col("num").alias("from_num"), epic(pl.col("parent_epic")).alias("to_num")),
        "grounded_in")
    grounded = tasks.filter(pl.col("parent_epic").is_not_null())
    add(grounded.select(pl.col("num").alias("from_num"),
                        epic(pl.col("parent_epic")).alias("to_num")), "grounded_in")
    heads = threads.filter((pl.col("role") == "thread") & (pl.col("thread") % 2 == 0))
    add(heads.select(pl.col("num").alias("from_num"),
                     epic(pl.col("thread") % len(epic_nums)).alias("to_num")), "grounded_in")
    # the blocks-DAG: within an epic, earlier tasks block later ones; early ones witnessed
    real = tasks.filter(pl.col("no") < params.tasks)
    real = real.with_columns(pl.col("parent_epic").fill_null(-1 - pl.col("no") % 5))
    seq = real.sort("parent_epic", "created_ns", "no").with_columns(
        pl.int_range(pl.len()).over("parent_epic").alias("i"),
        pl.len().over("parent_epic").alias("n"),
    )
    u_b1, u_b2 = _uniform(rng, seq.height), _uniform(rng, seq.height)
    seq = seq.with_columns(pl.lit(u_b1).alias("u1"), pl.lit(u_b2).alias("u2"),
                           pl.col("num").shift(1).over("parent_epic").alias("p1"),
                           pl.col("num").shift(2).over("parent_epic").alias("p2"))
    add(seq.filter(pl.col("p1").is_not_null() & (pl.col("u1") < 0.65))
        .select(pl.col("p1").alias("from_num"), pl.col("num").alias("to_num")), "blocks")
    add(seq.filter(pl.col("p2").is_not_null() & (pl.col("u2") < 0.25))
        .select(pl.col("p2").alias("from_num"), pl.col("num").alias("to_num")), "blocks")
    done = seq.filter(pl.col("i") < (pl.col("n") * 0.4).floor())
    git = (plain.select("num", "created_ns", "source").filter(pl.col("source") == "git-commit")
           .sort(pl.col("created_ns"), _cap_order(pl.col("num"))))
    proof = (done.sort(pl.col("created_ns"), _cap_order(pl.col("num")))
             .join_asof(git.select(pl.col("created_ns").alias("proof_ns"),
                                   pl.col("num").alias("from_num")).sort("proof_ns"),
                        left_on="created_ns", right_on="proof_ns", strategy="forward"))
    proof = proof.with_columns(pl.col("from_num").fill_null(git["num"][-1]))
    add(proof.select("from_num", pl.col("num").alias("to_num")), "witnesses")
    cyc = tasks.filter(pl.col("no") >= params.tasks)
    if cyc.height == 3:
        a, b, c = cyc["num"].to_list()
        add(pl.DataFrame({"from_num": [a, b, c], "to_num": [b, c, a]}), "blocks")
    # provenance edges among plain capsules of a conversation
    conv = plain.select("num", "conv").filter(pl.col("conv").is_not_null()).with_columns(
        pl.col("num").shift(1).over("conv").alias("prev"))
    u_d = _uniform(rng, conv.height)
    conv = conv.with_columns(pl.lit(u_d).alias("u")).filter(
        pl.col("prev").is_not_null() & ((pl.col("u") < 0.03) | (pl.col("u") > 0.99)))
    add(conv.filter(pl.col("u") < 0.03).select(pl.col("num").alias("from_num"),
                                               pl.col("prev").alias("to_num")), "derived_from")
    add(conv.filter(pl.col("u") > 0.99).select(pl.col("prev").alias("from_num"),
                                               pl.col("num").alias("to_num")), "part_of")
    del conv, u_d
    rel = pl.concat(edges).filter(pl.col("from_num") != pl.col("to_num"))
    # each end's instant (null: not a capsule of the plan, e.g. a handoff), found by its
    # number among the plan's, which rise in write order: a join would hash every id
    numbers = plan["num"]
    created = plan["created_ns"]

    def created_of(wanted: pl.Series) -> pl.Series:
        at = numbers.search_sorted(wanted, side="left").clip(0, numbers.len() - 1)
        found = numbers.gather(at) == wanted
        return pl.select(pl.when(found).then(created.gather(at))).to_series()

    rel = rel.with_columns(created_of(rel["from_num"]).alias("a"),
                           created_of(rel["to_num"]).alias("b"))
    rel = rel.with_columns(
        (pl.max_horizontal("a", "b").fill_null(end) + 600 * _NS).clip(None, end).alias("at_ns"))
    return rel.sort(pl.col("at_ns"), pl.col("kind"), _cap_order(pl.col("from_num")),
                    _cap_order(pl.col("to_num"))).select(
        pl.col("at_ns").cast(_TS).alias("at"), "kind",
        _cap(pl.col("from_num")).alias("from_id"), _cap(pl.col("to_num")).alias("to_id"))


def _recalls(seed: int, plan: pl.DataFrame, gone: pl.Series, params: SynthParams,
             end: int, chunk: int = 1 << 62) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Usage rows (``at``, ``capsule_id``, ``count``), and the capsules not forgotten
    (``gone``: numbers) in order of popularity (``created_ns``, ``pos``: the number is
    the plan's at ``pos``), which receipts share.

    The recalls (two per capsule) are drawn and counted per capsule and day ``chunk``
    capsules' worth at a time; the counts of the chunks add up."""
    rng = _rng(seed, "recalls")
    pool = plan.select("created_ns", "pos").filter(~pl.col("pos").is_in(
        plan.filter(pl.col("num").is_in(gone.implode()))["pos"].implode()))
    pool = pool.gather(_shuffled(rng, pool.height))  # popularity is independent of age
    events = 2 * params.capsules
    cdf = _zipf_cdf(pool.height, 1.1)
    draws = _Blocks(rng, events, [8, 8])  # which capsule, how long after it was written
    created = pool["created_ns"]
    counted: list[pl.DataFrame] = []
    for lo in range(0, events, 2 * chunk):
        u, delay = draws.uniforms(min(2 * chunk, events - lo))
        idx = _zipf_index(u, cdf)
        hits = pl.DataFrame({"idx": idx, "created_ns": created.gather(idx)}).with_columns(
            (pl.col("created_ns") + (-(1.0 - pl.lit(delay)).log() * 3 * _DAY_NS)
             .cast(pl.Int64)).alias("at_ns"))
        counted.append(hits.filter(pl.col("at_ns") < end)
                       .group_by("idx", (pl.col("at_ns") // _DAY_NS).alias("day"))
                       .agg(pl.col("at_ns").max(), pl.len().cast(pl.Int64).alias("count")))
        if len(counted) >= 8:  # the popular capsules recur in every chunk: fold them
            counted = [_add_counts(counted)]
    agg = _add_counts(counted)
    agg = agg.select("at_ns", plan["num"].gather(pool["pos"].gather(agg["idx"])).alias("num"),
                     "count").sort(pl.col("at_ns"), _cap_order(pl.col("num")))
    return agg.select(pl.col("at_ns").cast(_TS).alias("at"),
                      _cap(pl.col("num")).alias("capsule_id"), "count"), pool


def _add_counts(counted: list[pl.DataFrame]) -> pl.DataFrame:
    """Usage counts per capsule and day (``idx``, ``day``, ``at_ns``: the last, ``count``)
    of several chunks of recalls, added up."""
    return pl.concat(counted).group_by("idx", "day").agg(pl.col("at_ns").max(),
                                                         pl.col("count").sum())


def _shuffled(rng: random.Random, n: int) -> pl.Series:
    """``0..n-1`` in the order ``rng.shuffle(list(range(n)))`` leaves them, shuffled in a
    machine-word array (a list of ``n`` Python ints costs several times the memory)."""
    import array

    import pyarrow as pa

    wide = n >= 2**31  # four bytes a place while they fit
    order = array.array("q" if wide else "i", range(n))
    rng.shuffle(order)  # a mutable sequence of ints, as shuffle needs
    return pl.Series(pl.from_arrow(pa.Array.from_buffers(pa.int64() if wide else pa.int32(), n,
                                                         [None, pa.py_buffer(order)])))


def _corroborations(rng: random.Random, plain: pl.DataFrame, end: int) -> pl.DataFrame:
    plain = plain.select("num", "pos", "created_ns", "source")
    anchored = plain.filter(pl.col("source").is_in(["file", "git-commit"]))
    u, v = _uniform(rng, anchored.height), _uniform(rng, anchored.height)
    picked = anchored.with_columns(pl.lit(u).alias("u"), pl.lit(v).alias("v")).filter(
        pl.col("u") < 0.35)
    rows = picked.select(
        _cap(pl.col("num")).alias("capsule_id"),
        pl.when(pl.col("source") == "file").then(pl.lit("anchor_path"))
        .otherwise(pl.lit("anchor_sha")).alias("kind"),
        pl.concat_str([pl.lit("HEAD~"), pl.col("pos") % 97]).alias("ref"),
        _verdict(pl.col("v")).alias("verdict"),
        (pl.col("created_ns") + _DAY_NS).clip(None, end).alias("at_ns"),
    )
    content = picked.filter(pl.col("v") < 0.2).select(
        _cap(pl.col("num")).alias("capsule_id"), pl.lit("anchor_content").alias("kind"),
        pl.concat_str([pl.lit("blob:"), pl.col("pos")]).alias("ref"),
        _verdict(pl.col("u") * 2.8).alias("verdict"),
        (pl.col("created_ns") + 2 * _DAY_NS).clip(None, end).alias("at_ns"))
    mentions = plain.filter(pl.col("pos") % 53 == 7).select(
        _cap(pl.col("num")).alias("capsule_id"), pl.lit("mention").alias("kind"),
        pl.concat_str([pl.lit("commit:"), pl.col("pos")]).alias("ref"),
        pl.lit("corroborated").alias("verdict"),
        (pl.col("created_ns") + 3 * _DAY_NS).clip(None, end).alias("at_ns"))
    # a later scan re-judged some rows (latest per (capsule_id, kind, ref) wins)
    rejudged = rows.filter(pl.col("at_ns") % 19 == 0).with_columns(
        pl.lit("drifted").alias("verdict"), (pl.col("at_ns") + 5 * _DAY_NS).clip(None, end))
    out = pl.concat([rows, content, mentions, rejudged]).sort("at_ns", "capsule_id", "kind")
    return out.select(pl.col("at_ns").cast(_TS).alias("at"), "capsule_id", "kind", "ref",
                      "verdict", pl.concat_str([pl.lit("scanned "), pl.col("ref")]).alias("detail"))


def _verdict(u: pl.Expr) -> pl.Expr:
    return (pl.when(u < 0.75).then(pl.lit("corroborated"))
            .when(u < 0.9).then(pl.lit("drifted")).otherwise(pl.lit("missing")))


# ---- recall receipts, event times, epistemics (nMEMORY 0.3.0), with their truth --------

_RECEIPT_LANE_W = (0.5, 0.2, 0.3)  # term, vector, fused (reference order of RECALL_LANES)
_RESOLVED_SHARE = 0.3  # of the typo and absent miss terms: a later receipt answers them
_TAUGHT_SHARE = 0.25  # of the typo terms: the word they meant taught as an alias after
_EARLY_SHARE = 0.4  # of the typo terms missed twice or more: taught between the misses
_DEAD_SHARE = 0.5  # of the live plain capsules no recall names: planted never returned
# receipts per commit of `synthesize`: one partition file's rows, so the store holds them
# in the files one commit of them all would write, without holding them all at once
_RECEIPT_ROWS = PART_ROWS


def _windows(plan: pl.DataFrame, start: int, end: int, chunk_rows: int) -> tuple[int, int]:
    """How many windows `synthesize`'s timeline has, and their width in nanoseconds."""
    windows = max(6, math.ceil(plan.height / chunk_rows))
    return windows, (end - start) // windows + 1


def _handoff_plan(plan: pl.DataFrame, sessions: pl.DataFrame, start: int, end: int,
                  chunk_rows: int) -> pl.DataFrame:
    """The handoff capsules (``session``, ``id``, ``created_ns``, ``content``) as
    `synthesize`'s timeline writes them: windows of capsules, with the sessions finished
    before each window in between."""
    windows, width = _windows(plan, start, end, chunk_rows)
    per_window = (plan.select(((pl.col("arrive_ns") - start) // width).clip(0, windows - 1)
                              .alias("w")).group_by("w").len())
    counts = dict(per_window.iter_rows())
    handoffs = (sessions.filter(pl.col("handoff").is_not_null() & pl.col("finish_ns").is_not_null())
                .sort("finish_ns", "session"))
    rows = []
    for k, (session, t, text) in enumerate(
            handoffs.select("session", "finish_ns", "handoff").iter_rows()):
        w = min((t - start) // width, windows - 1)
        earlier = sum(counts.get(i, 0) for i in range(w))
        rows.append((session, f"cap-{earlier + k + 1}", t // 1000 * 1000, text))
    return pl.DataFrame(rows, orient="row", schema={
        "session": pl.Int64, "id": pl.String, "created_ns": pl.Int64, "content": pl.String})


def _plan_ids(plan: pl.DataFrame, sessions: pl.DataFrame, start: int, end: int,
              chunk_rows: int) -> tuple[pl.Series, pl.DataFrame]:
    """The id each planned capsule gets (in plan order), and the handoff capsules."""
    windows, width = _windows(plan, start, end, chunk_rows)
    handoffs = _handoff_plan(plan, sessions, start, end, chunk_rows)
    # a planned capsule's id: its place in the plan, after the handoffs of earlier windows
    finish = sessions.filter(pl.col("handoff").is_not_null())["finish_ns"].drop_nulls().sort()
    w_end = start + (((pl.col("arrive_ns") - start) // width).clip(0, windows - 1) + 1) * width
    ends = plan.select(w_end.alias("w_end"))["w_end"]
    before = finish.search_sorted(ends, side="left").cast(pl.Int64)
    ids = pl.select(pl.format("cap-{}", pl.lit(plan["pos"]) + 1 + pl.lit(before))).to_series()
    return ids.rename("id"), handoffs


def _one_or_two(rows: pl.DataFrame, first: str, second: str) -> pl.Series:
    """Per row the list ``[first]``, or ``[first, second]`` where the row's ``two`` holds
    (what ``concat_list(first, second).list.head(1 + two)`` gives, built from the two
    columns' values in row order, many times faster than listing two columns)."""
    one = rows.select(pl.int_range(pl.len()).alias("row"), pl.lit(0).alias("k"),
                      pl.col(first).alias("v"))
    both = rows.select(pl.int_range(pl.len()).alias("row"), pl.lit(1).alias("k"),
                       pl.col(second).alias("v"), "two").filter("two").drop("two")
    return (pl.concat([one, both]).sort("row", "k")
            .group_by("row", maintain_order=True).agg("v")["v"])


def _receipts(order: pl.DataFrame, hits: pl.DataFrame, abstains: pl.DataFrame,
              resolved: pl.DataFrame, popular: pl.DataFrame, plan: pl.DataFrame,
              rows: int) -> Iterator[pl.DataFrame]:
    """The recall receipts in write order (``order``: each one's part, 0 hits, 1
    abstains, 2 resolutions, and place in it), ``rows`` at a time with their ids."""
    for lo in range(0, order.height, rows):
        piece = order.slice(lo, rows).with_row_index("rank", offset=lo)
        places = [piece.filter(pl.col("part") == part).select("rank", "place")
                  for part in range(3)]
        parts = [_hit_rows(hits.gather(places[0]["place"]), popular, plan)]
        parts += [frame.gather(at["place"]) for frame, at in zip((abstains, resolved),
                                                               places[1:], strict=True)]
        frame = pl.concat([part.with_columns(at["rank"]) for part, at in zip(parts, places,
                                                                            strict=True)
                           if at.height], how="diagonal").sort("rank")
        yield frame.select(
            pl.col("at_ns").cast(_TS).alias("at"), pl.format("rcpt-{}", pl.col("rank") + 1)
            .alias("id"), "terms", "returned_ids", "outcome", "lane", "project_id",
            (pl.col("project_prefix") if "project_prefix" in frame.columns
             else pl.lit(None)).cast(pl.String).alias("project_prefix"),
            pl.lit(None, dtype=pl.String).alias("session_id"), "source")


def _hit_rows(picks: pl.DataFrame, popular: pl.DataFrame, plan: pl.DataFrame) -> pl.DataFrame:
    """Receipts of recalls that answered, from their picks (``a``, ``b``: places in
    ``popular``, ``x``: the uniform, ``at_ns``)."""
    lanes = list(RECALL_LANES)
    first = popular.gather(picks["a"])
    second = popular.gather(picks["b"])
    a_words = plan.select("project", "w1").gather(first["pos"]).select(
        _project_name(pl.col("project")).alias("project_id"), pl.col("w1").cast(pl.String))
    nums = plan["num"]
    ids = pl.DataFrame({"a": nums.gather(first["pos"]), "b": nums.gather(second["pos"])}).select(
        _cap(pl.col("a")).alias("a"), _cap(pl.col("b")).alias("b"))
    hits = pl.DataFrame({
        "a": ids["a"], "a_ns": first["created_ns"], "project_id": a_words["project_id"],
        "w": a_words["w1"], "b": ids["b"], "b_ns": second["created_ns"],
        "w2": plan["w1"].gather(second["pos"]).cast(pl.String), "x": picks["x"],
        "at_ns": picks["at_ns"],
    })
    # one uniform picks the lane, whether a second capsule came back, whether a prefix fenced
    hits = hits.with_columns(((pl.col("x") * 7 % 1 < 0.3) & (pl.col("b_ns") <= pl.col("at_ns"))
                              & (pl.col("b") != pl.col("a"))).alias("two"))
    return hits.select(
        "at_ns", _one_or_two(hits, "w", "w2").alias("terms"),
        _one_or_two(hits, "a", "b").alias("returned_ids"),
        pl.lit("grounded").alias("outcome"),
        _lookup(lanes, _pick(pl.col("x"), _RECEIPT_LANE_W)).alias("lane"),
        "project_id",
        pl.when(pl.col("x") * 53 % 1 < 0.2).then(pl.col("project_id").str.split("/").list.first())
        .alias("project_prefix"),
        pl.lit(0, dtype=pl.Int64).alias("source"))


def _recall_tables(seed: int, params: SynthParams, plan: pl.DataFrame, gone: pl.Series,
                   absorbed: pl.Series, superseded: pl.Series, recalled: pl.Series,
                   popularity: list[pl.DataFrame], misses: pl.DataFrame, start: int,
                   end: int, anchors: Callable[[pl.Series], pl.DataFrame],
                   chunk: int = 1 << 62,
                   ) -> tuple[Iterator[pl.DataFrame], dict[str, pl.DataFrame]]:
    """The v21 rows with known answers: the ``recall_receipts`` (with ids, in write order,
    a piece at a time: `_receipts`), and ``event_times``, ``epistemics`` and ``dead`` (the
    planted dead weight: live plain capsules that no recall and no receipt names).
    ``anchors``: ``id`` and ``anchor`` of the capsules a series of ids names (asked for
    the few that epistemics quote); ``chunk``: how many receipts' draws to hold at a time;
    ``popularity``: `_recalls`' capsules in order of popularity, the one frame of the
    list, taken out of it (the receipts keep a copy without the dead weight: the caller
    keeps no other). The capsules are named by number (``num``: ``gone``, ``absorbed``,
    ``superseded``, ``recalled``, the popularity order and ``dead``)."""
    rng = _rng(seed, "receipts")
    # the plain capsules' places: their rows and their draws are taken a chunk at a time
    plain_pos = plan.select(pl.col("pos").filter(pl.col("role") == "plain")).to_series()

    def plain_rows(blocks: _Blocks) -> Iterator[tuple[pl.DataFrame, list[pl.Series]]]:
        for lo in range(0, plain_pos.len(), chunk):
            at = plain_pos.slice(lo, chunk)
            yield (plan.select("num", "pos", "created_ns", "source", "authority_class", "w1")
                   .gather(at), blocks.uniforms(at.len()))

    # found by search in the sorted numbers (a hash of them would be built per chunk)
    spared = pl.concat([gone, absorbed, superseded, recalled]).unique().sort()
    dead_parts = []
    for rows, (u_dead,) in plain_rows(_Blocks(rng, plain_pos.len(), [8], after=True)):
        nums = rows["num"]
        at = spared.search_sorted(nums).clip(0, max(spared.len() - 1, 0))
        kept = (spared.gather(at) != nums) if spared.len() else pl.repeat(True, nums.len(),
                                                                          eager=True)
        dead_parts.append(rows.filter(kept & (u_dead < _DEAD_SHARE)).select("num", "pos"))
    dead = pl.concat(dead_parts)
    del dead_parts, spared
    # what receipts return: every capsule not forgotten and not planted dead, in the
    # popularity order of the usage rows (by created, for the planted resolutions)
    popular = popularity.pop().filter(~pl.col("pos").is_in(dead["pos"].implode()))
    pool = popular.sort(pl.col("created_ns"),
                        _cap_order(pl.lit(plan["num"].gather(popular["pos"]))))
    lanes = list(RECALL_LANES)

    # receipts that ran when a recall missed: the miss's terms, nothing returned
    u_ab, u_lane_ab, u_proj = (_uniform(rng, misses.height) for _ in range(3))
    projects = [p for p, _, _ in PROJECTS]
    abstains = misses.with_columns(
        pl.lit(u_ab).alias("u"), _lookup(lanes, _pick(u_lane_ab, _RECEIPT_LANE_W)).alias("lane"),
        _lookup(projects, (pl.lit(u_proj) * len(projects)).cast(pl.Int64)).alias("project_id"),
    ).filter(pl.col("u") < 0.5).select(
        pl.col("at").cast(pl.Int64).alias("at_ns"), pl.concat_list(pl.col("term")).alias("terms"),
        pl.lit([], dtype=pl.List(pl.String)).alias("returned_ids"), "outcome", "lane",
        "project_id", pl.lit(1, dtype=pl.Int64).alias("source"))
    # planted resolutions: a later receipt for a typo or absent term returned a capsule
    last = (misses.filter(pl.col("edit") != "exact").group_by("term")
            .agg(pl.col("at").max().cast(pl.Int64).alias("last_ns")).sort("term"))
    u_res, u_delay, u_pick, u_case = (_uniform(rng, last.height) for _ in range(4))
    created = pool["created_ns"]
    planted = last.with_columns(
        pl.lit(u_res).alias("u"), pl.lit(u_pick).alias("v"), pl.lit(u_case).alias("c"),
        (pl.col("last_ns") + 60 * _NS
         + (-(1.0 - pl.lit(u_delay)).log() * 2 * _DAY_NS).cast(pl.Int64)).alias("at_ns"),
    ).filter((pl.col("u") < _RESOLVED_SHARE) & (pl.col("at_ns") < end))
    planted = planted.with_columns(
        pl.lit(created).search_sorted(pl.col("at_ns"), side="right").alias("n_before")
    ).filter(pl.col("n_before") > 0).with_columns(
        (pl.col("v") * pl.col("n_before")).cast(pl.Int64).alias("k"))
    answer = pool.gather(planted["k"])
    answer_project = pl.select(_project_name(
        pl.lit(plan["project"].gather(answer["pos"])))).to_series()
    answer_ids = pl.select(_cap(pl.lit(plan["num"].gather(answer["pos"])))).to_series()
    del pool, created  # the hits need only the popularity order
    resolved = planted.select(
        "at_ns",
        pl.concat_list(pl.when(pl.col("c") < 0.3).then(pl.col("term").str.to_titlecase())
                       .otherwise(pl.col("term"))).alias("terms"),
        pl.concat_list(pl.lit(answer_ids)).alias("returned_ids"),
        pl.lit("grounded").alias("outcome"), pl.lit("term").alias("lane"),
        pl.lit(answer_project).alias("project_id"),
        pl.lit(2, dtype=pl.Int64).alias("source"))
    # the rest: recalls that answered, Zipf over the pool, after the capsule was written;
    # drawn a chunk at a time, each kept as the pair of places it picked, its uniform and
    # its instant (the rows are made in write order, a chunk at a time: `_receipts`)
    n_hits = max(0, params.receipts - abstains.height - resolved.height)
    cdf = _zipf_cdf(max(1, popular.height), 1.1)
    draws = _Blocks(rng, n_hits, [8] * 4, after=True)  # the stream goes on: event times
    # event times and epistemics on a share of the plain capsules: the stream's next
    # draws (the hits' blocks are passed over), made before the hits so that every plain
    # capsule's row goes first
    timed_parts, known_parts = [], []
    for rows, (u_ev, u_epi) in plain_rows(_Blocks(rng, plain_pos.len(), [8, 8], after=True)):
        timed_parts.append(rows.select("num", "created_ns").with_columns(pl.lit(u_ev).alias("u"))
                           .filter(pl.col("u") < 0.08))
        known_parts.append(rows.with_columns(pl.lit(u_epi).alias("e")).filter(pl.col("e") < 0.12))
    # sub-draws of the two uniforms (their fractional digits further down), on the rows
    # each share picks
    timed = pl.concat(timed_parts).with_columns(
        (pl.col("u") * 97 % 1).alias("k"), (pl.col("u") * 89 % 1).alias("l"),
        (pl.col("u") * 83 % 1).alias("b"),
    ).with_columns(
        (pl.col("created_ns") - (pl.col("b") * 30 * _DAY_NS).cast(pl.Int64)).alias("t0"))
    event_times = timed.select(
        (pl.col("created_ns") + _NS).clip(None, end).cast(_TS).alias("at"),
        _cap(pl.col("num")).alias("capsule_id"),
        pl.when(pl.col("k") < 0.5).then(pl.col("t0")).cast(_TS).alias("event_at"),
        pl.when(pl.col("k") >= 0.5).then(pl.col("t0")).cast(_TS).alias("event_from"),
        pl.when(pl.col("k") >= 0.7)
        .then(pl.col("t0") + (1 + pl.col("l") * 59).cast(pl.Int64) * _DAY_NS).cast(_TS)
        .alias("event_to"),
    ).sort("at", "capsule_id")
    state = (pl.when(pl.col("source").is_in(["file", "git-commit"])).then(pl.lit("observed"))
             .when(pl.col("authority_class") == "agent-inferred").then(pl.lit("inferred"))
             .otherwise(pl.lit("unverified")))
    known = pl.concat(known_parts).with_columns(
        (pl.col("e") * 79 % 1).alias("h"), (pl.col("e") * 73 % 1).alias("s"),
        pl.col("w1").cast(pl.String).str.to_lowercase().alias("word"),
        _cap(pl.col("num")).alias("id"))
    hinted = known.filter(pl.col("h") < 0.5)["id"]
    # the anchors the hints quote (never every capsule's at once)
    quoted = anchors(hinted)
    known = known.join(quoted, on="id", how="left", maintain_order="left")
    epistemics = known.select(
        (pl.col("created_ns") + 2 * _NS).clip(None, end).cast(_TS).alias("at"),
        pl.col("id").alias("capsule_id"), state.alias("evidence_state"),
        pl.when(pl.col("h") < 0.5)
        .then(pl.concat_str([pl.lit("grep -rn "), pl.col("word"), pl.lit(" "),
                             pl.col("anchor")])).alias("proof_hint"),
        pl.when(pl.col("s") < 0.3)
        .then(pl.concat_str([pl.lit("the "), pl.col("word"), pl.lit(" setup changes")]))
        .alias("stale_if"),
    ).sort("at", "capsule_id")
    del timed, known, timed_parts, known_parts
    created = popular["created_ns"]
    picks: list[pl.DataFrame] = []
    for lo in range(0, n_hits, chunk):
        u1, u2, u_at, u_x = draws.uniforms(min(chunk, n_hits - lo))
        first = _zipf_index(u1, cdf)
        picks.append(pl.DataFrame({
            "a": first.cast(pl.UInt32), "b": _zipf_index(u2, cdf).cast(pl.UInt32), "x": u_x,
            "a_ns": created.gather(first),
        }).select("a", "b", "x", (pl.col("a_ns") + (pl.lit(u_at) * (end - pl.col("a_ns")))
                                  .cast(pl.Int64)).alias("at_ns")))
    hits = (pl.concat(picks) if picks else pl.DataFrame(
        schema={"a": pl.UInt32, "b": pl.UInt32, "x": pl.Float64, "at_ns": pl.Int64}))
    del picks
    # in time order, ties by part and then by place (as a stable sort of the parts would)
    order = pl.concat([
        frame.select("at_ns", pl.lit(part, dtype=pl.Int8).alias("part"),
                     pl.int_range(pl.len(), dtype=pl.Int64).alias("place"))
        for part, frame in enumerate((hits, abstains, resolved))
    ]).sort("at_ns", "part", "place")
    receipts = _receipts(order, hits, abstains, resolved, popular, plan, _RECEIPT_ROWS)
    return receipts, {"event_times": event_times, "epistemics": epistemics,
                      "dead": dead.select("num")}


def _alias_plan(seed: int, misses: pl.DataFrame, end: int) -> pl.DataFrame:
    """Taught aliases with known answers (``at``, ``term``, ``alias``, in write order): for
    a share of the typo terms, the word they meant taught some time after their last miss
    (these resolve the term); for a few terms missed twice or more, taught between their
    first and last miss (a teaching the term was missed after: no resolution). Every
    third term is spelled in title case, as a caller types it (the store folds it)."""
    rng = _rng(seed, "aliases")
    typos = (misses.filter(pl.col("word").is_not_null() & (pl.col("edit") != "exact")
                           & (pl.col("term") != pl.col("word")))
             .group_by("term").agg(pl.col("word").first(),
                                   pl.col("at").min().cast(pl.Int64).alias("first_ns"),
                                   pl.col("at").max().cast(pl.Int64).alias("last_ns"),
                                   pl.len().alias("n"))
             .sort("term"))
    u, d = (_uniform(rng, typos.height) for _ in range(2))
    typos = typos.with_columns(pl.lit(u).alias("u"), pl.lit(d).alias("d"))
    after = typos.filter(pl.col("u") < _TAUGHT_SHARE).with_columns(
        (pl.col("last_ns") + 30 * _NS
         + (-(1.0 - pl.col("d")).log() * _DAY_NS).cast(pl.Int64)).alias("at_ns"))
    early = typos.filter((pl.col("u") >= 1.0 - _EARLY_SHARE) & (pl.col("n") >= 2)
                         & (pl.col("last_ns") - pl.col("first_ns") > 2)).with_columns(
        (pl.col("first_ns") + 1 + ((pl.col("last_ns") - pl.col("first_ns") - 2) * pl.col("d"))
         .cast(pl.Int64)).alias("at_ns"))
    return (pl.concat([after, early]).filter(pl.col("at_ns") < end)
            .sort("at_ns", "term")
            .select(pl.col("at_ns").cast(_TS).alias("at"),
                    pl.when(pl.int_range(pl.len()) % 3 == 0).then(pl.col("term").str.to_titlecase())
                    .otherwise(pl.col("term")).alias("term"),
                    pl.col("word").alias("alias")))


@dataclasses.dataclass(frozen=True)
class RecallTruth:
    """What a synthetic store's recall receipts mean, known by construction.

    Attributes:
        dead_weight: ``id``: the planted dead weight, live plain capsules that no recall
            (usage row) and no receipt names.
        recalled: ``id``: every capsule a usage row or a receipt's ``returned_ids`` names
            (any other capsule was never recalled).
        resolutions: one row per missed term (folded): ``term``, ``first_miss``,
            ``last_miss``, ``repeats``, and the first event strictly after the last miss
            that answers it (``resolved_at``, ``resolved_by``, ``resolution``:
            ``receipt``, a receipt for the term that returned a capsule, ``capsule``,
            a capsule written whose words hold the term, or ``alias``, the word the typo
            meant taught as its alias, by that word; all null while open), and
            ``planted`` (a receipt planted to answer a typo or an absent word, or an
            alias taught after the term's last miss).
    """

    dead_weight: pl.DataFrame
    recalled: pl.DataFrame
    resolutions: pl.DataFrame


def recall_truth(seed: int = 0, *, capsules: int = 3000,
                 clock_start: datetime.datetime = DEFAULT_CLOCK_START, noise: bool = False,
                 misses: int | None = None, receipts: int | None = None,
                 dag_cycle: bool = False, chunk_rows: int = 100_000) -> RecallTruth:
    """The ground truth of a synthetic store's recall receipts, from the same plan
    `synthesize` writes (give it the same arguments).

    Examples:
        >>> truth = recall_truth(0, capsules=400)
        >>> truth.dead_weight.height > 0 and truth.resolutions["planted"].any()
        True
    """
    params = _params(capsules, misses, receipts)
    start = _ns(clock_start)
    end = start + params.span_days * _DAY_NS
    plan = _capsule_plan(seed, params, clock_start, dag_cycle, noise)
    sessions = _session_plan(seed, params, clock_start)
    ids, handoffs = _plan_ids(plan, sessions, start, end, chunk_rows)
    plan = plan.with_columns(ids, ids.str.strip_prefix("cap-").cast(pl.Int64).alias("num"))
    plain = _ids_of(plan, "plain").select("id", "num", "pos", "project", "conv", "created_ns",
                                          "source", "authority_class", "kind")
    rng = _rng(seed, "events")  # the draws of `_write_events`, in its order
    members, forgets, gone = _fates(rng, params, plain, _ids_of(plan, "task").sort("no"))
    _uniform(rng, plain.height), _uniform(rng, plain.height)  # classifications, tiers
    u_rev, u_back = _uniform(rng, plain.height), _uniform(rng, plain.height)
    superseded = _revisions(plain, u_rev, u_back)["to_num"]
    recalls, popular = _recalls(seed, plan, gone, params, end)
    miss = _miss_plan(seed, params, clock_start, noise)
    absorbed = pl.Series([int(m.removeprefix("cap-")) for ms in members for m in ms],
                         dtype=pl.Int64)
    recalled_nums = recalls["capsule_id"].str.strip_prefix("cap-").cast(pl.Int64).unique()
    pieces, tables = _recall_tables(seed, params, plan, gone, absorbed, superseded,
                                    recalled_nums, [popular], miss, start, end,
                                    lambda ids: plan.select("id", "anchor").filter(
                                        pl.col("id").is_in(ids.implode())))
    receipts_frame = pl.concat(list(pieces))
    recalled = (pl.concat([recalls.select(pl.col("capsule_id").alias("id")),
                           receipts_frame.select(pl.col("returned_ids").alias("id"))
                           .explode("id").drop_nulls()])
                .unique().sort("id"))
    # every missed term: when it was missed, and the first answer after its last miss
    terms = miss.group_by("term").agg(
        pl.col("at").min().alias("first_miss"), pl.col("at").max().alias("last_miss"),
        pl.len().cast(pl.Int64).alias("repeats"))
    erased = forgets.filter(pl.col("mode") != "tombstone")["id"]
    n_before = plan.height + handoffs.height
    written = pl.concat([
        plan.filter(~pl.col("id").is_in(erased.implode())).select("id", "created_ns", "content"),
        handoffs.select("id", "created_ns", "content"),
        pl.DataFrame({"id": [f"cap-{n_before + r + 1}" for r in range(len(members))],
                      "created_ns": [end] * len(members),
                      "content": [_rollup_text(r, len(ms)) for r, ms in enumerate(members)]},
                     schema={"id": pl.String, "created_ns": pl.Int64, "content": pl.String}),
    ])
    by_capsule = (written.select("id", pl.col("created_ns").cast(_TS).alias("at"),
                                 fold_expr(pl.col("content")).str.extract_all(r"\w+")
                                 .alias("term"))
                  .explode("term").filter(pl.col("term").str.contains(r"^\D"))
                  .unique(["id", "term"])
                  .select("term", "at", pl.col("id").alias("by"),
                          pl.lit("capsule").alias("resolution")))
    answered = receipts_frame.filter(pl.col("returned_ids").list.len() > 0)
    by_receipt = (answered.select("at", "id", "source", pl.col("terms").alias("term"))
                  .explode("term").with_columns(fold_expr(pl.col("term")).alias("term"))
                  .unique(["id", "term"])
                  .select("term", "at", pl.col("id").alias("by"),
                          pl.lit("receipt").alias("resolution"),
                          (pl.col("source") == 2).alias("planted")))
    by_alias = _alias_plan(seed, miss, end).select(
        fold_expr(pl.col("term")).alias("term"), "at", pl.col("alias").alias("by"),
        pl.lit("alias").alias("resolution"), pl.lit(True).alias("planted"))
    events = (pl.concat([by_capsule.with_columns(pl.lit(False).alias("planted")), by_receipt,
                         by_alias])
              .join(terms.select("term", "last_miss"), on="term")
              .filter(pl.col("at") > pl.col("last_miss"))
              .sort("at", "resolution", "by").group_by("term", maintain_order=True).first())
    resolutions = (terms.join(events.select("term", pl.col("at").alias("resolved_at"),
                                            pl.col("by").alias("resolved_by"), "resolution",
                                            "planted"),
                              on="term", how="left")
                   .with_columns(pl.col("planted").fill_null(False)).sort("term"))
    dead = tables["dead"].select(_cap(pl.col("num")).alias("id"))
    return RecallTruth(dead_weight=dead.sort("id"), recalled=recalled,
                       resolutions=resolutions)


# ---- the bundled sample store -------------------------------------------------------------

SAMPLE_CAPSULES = 3000
SAMPLE_SEED = 0


def _candidates() -> Iterator[Path]:
    try:
        packaged = resources.files("memframe") / "_data" / "sample-store"
        yield Path(str(packaged))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - namespace oddities
        pass
    yield Path(__file__).resolve().parent.parent / "data" / "sample-store"


def sample_store_path() -> Path:
    """Where the bundled sample store is (installed package data first, else the repo's).

    Returns:
        The directory of the sample store (``memframe/_data/sample-store`` in an
        installed wheel, ``data/sample-store`` in a source checkout).

    Raises:
        MemframeError: neither place holds a store.

    Examples:
        >>> from memframe.synth import sample_store_path
        >>> (sample_store_path() / "memframe.json").is_file()
        True
    """
    tried = []
    for path in _candidates():
        if (path / "memframe.json").is_file():
            return path
        tried.append(str(path))
    raise MemframeError(
        "the bundled sample store is missing (looked in " + ", ".join(tried) + "); "
        "regenerate it with `python scripts/make_sample_store.py` or pass a STORE"
    )
