"""Differential tests: ``slotwise trec-eval -q -m all_trec`` against pytrec_eval (trec_eval
9.0.x), every per-query line and every ``all`` line.

Seeded random qrels and runs are written as TREC files in ``tmp_path`` and read by the real
readers (``engine.io.trec.read_qrels`` / ``read_run``) into
``engine.analysis.trec_eval.trec_eval``; one configuration goes through the command line
(``engine.cli.main(["trec-eval", ...])``, with a file layout that takes the line-by-line
reader). Values are compared at the printed four decimals: tolerance half a unit of the
4th decimal (5e-5) plus 1e-9 for float noise.

Sizes (qrels queries; about 6% of them missing from the run, 1 in 30 extra run-only
queries): -l1 2,500; -l2 -M25 1,500; -l2 800; -l3 -M7 800; -c -l1 1,500; -c -l2 -M30
1,000; -J -l1 1,000; -J -l2 -c 800; CLI -q -c -J -l2 1,000; -J with negative labels 600;
-J -M10 600: 12,100 queries; ``@pytest.mark.slow`` adds 18,000 more
(-l1, -c -l2 -M30 and -J -l1, 6,000 each).

The random data holds: tied scores (one decimal, so many ties, ``-0.0`` among them; 5% of
the queries with one score for every document, ordered by docno alone), doc ids whose byte
order is not their numeric order (``d10 < d9``, ``D.. < d..``), graded labels 0..3,
negative labels (-1, -2), retrieved documents absent from the qrels, queries without any
relevant document, queries of the qrels missing from the run (a TREC run cannot write an
empty ranking: a missing query is trec_eval's empty run), queries of the run missing from
the qrels, and run lines shuffled across queries. Every qrels query has a label >= 0:
trec_eval 9 (and pytrec_eval) allocate ``max label + 1`` counters and crash when every
label of a query is negative (see docs/metrics.md).

How each option is emulated on the pytrec_eval side:

- ``-l N``: pytrec_eval's ``relevance_level=N`` (N = 1, 2, 3: pytrec_eval refuses 0,
  "Argument relevance_level should be positive", so ``-l 0`` is not covered).
- ``-J``: pytrec_eval's ``judged_docs_only_flag=True`` (trec_eval's own code: it drops
  every retrieved document whose qrels value is missing *or negative*).
- ``-M N``: each query's run is cut to its first N documents in trec_eval's order (score
  descending, ties by docno descending, byte-wise) before pytrec_eval sees it. trec_eval
  cuts first and drops unjudged documents (``-J``) afterwards (form_res_rels.c), and so
  does this emulation.
- ``-c``: trec_eval 10 evaluates a query of the qrels that the run lacks on a bogus
  ranking of ONE document absent from the qrels (``ceci_nest_pas_un_docno``, trec_eval.c)
  and then zeroes its ``num_ret``, ``utility``, ``unj_*``, ``rbp_resid`` and
  ``relstring``. The emulation does exactly that: pytrec_eval evaluates a
  one-dummy-document run for the missing queries, then ``num_ret`` and ``utility`` are
  set to 0. The test asserts that this equals the by-hand empty-ranking values (0 for
  every measure but the query's ``num_rel``), which is also what trec_eval 9's ``-c``
  adds (missing queries add 0 to every sum; ``num_rel`` counts every qrels query), so the
  ``all`` lines agree with both versions. Giving pytrec_eval an *empty* ranking instead
  would be wrong for ``iprec_at_recall``/``11pt_avg``: trec_eval computes them as 0/0 =
  NaN when ``num_ret`` is 0 (at every level whose cutoff is 0 relevant documents), not 0.
  slotwise prints ``-nan`` there too, as trec_eval 10 does; that happens here when
  ``-J`` removes every retrieved document of a query (and, with ``-c -J``, for a missing
  query, whose bogus document ``-J`` removes too). The test expects ``-nan`` wherever
  trec_eval's value is NaN, and counts those cases. With ``-c``, ``num_rel``'s ``all``
  line is trec_eval 10's ``te_calc_avg_num_rel``: every label > 0 of the qrels, whatever
  ``-l``.

trec_eval 9 vs 10 (``slotwise trec-eval`` follows 10): ``iprec_at_recall_c`` and
``11pt_avg`` turn the recall level c into a number of relevant documents with
``(long)(c·R + 0.9)`` in 9 and ``lround(c·R)`` in 10. The test ports trec_eval's
``te_calc_iprec_at_recall`` loop to Python with both roundings, checks the 9-rounding port
against pytrec_eval on every query (so the port is trec_eval's code), and checks slotwise
against the 10-rounding port everywhere; it also compares slotwise with pytrec_eval
directly wherever the two cutoffs agree, and asserts that they only disagree where the
fractional part of c·R is in [0.1, 0.5).

Measures of trec_eval 10 that pytrec_eval lacks: ``relstring`` and ``unj_*`` are checked
against ports of trec_eval 10's ``m_relstring.c`` and ``m_unjudged.c``; ``rbp`` and
``rbp_resid`` are not checked (no reference implementation at hand).

Discrepancies this suite found, all fixed in slotwise and each pinned by a test below:
``-J`` drops every retrieved document with a negative qrels value, ``-J -M N`` cuts to
the first N documents before dropping the unjudged ones, ``relstring`` prints ``.`` for
every negative qrels value, and ``Rndcg`` takes ``-l`` (trec_eval's Rndcg is 0 when no
document reaches the level, ``if (res_rels.num_rel == 0) return 0``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

import engine
from engine.analysis.trec_eval import Options, parse_measures, trec_eval
from engine.cli import main
from engine.io.trec import read_qrels, read_run, run_tag

pytrec_eval = pytest.importorskip("pytrec_eval")

TOLERANCE = 5e-5 + 1e-9  # half a unit of the 4th printed decimal, plus float noise
LEVELS = tuple(k / 10 for k in range(11))  # trec_eval's double_cutoff_array
IPREC = tuple(f"iprec_at_recall_{c:.2f}" for c in LEVELS)
DUMMY = "ceci_nest_pas_un_docno"  # trec_eval 10's bogus document for a missing query
RUNID = "rnd"

# trec_eval 10 measures pytrec_eval cannot produce: relstring and unj_* are checked by
# hand, rbp and rbp_resid not at all
NOT_IN_PYTREC = {"relstring", "unj_5", "unj_10", "unj_20", "rbp", "rbp_resid"}
# pytrec_eval per-query values that trec_eval prints in the all lines only
SUMMARY_ONLY = {"gm_map", "gm_bpref", "runid", "num_q"}
# summed, not averaged, in the all line
SUMMED = {"num_ret", "num_rel", "num_rel_ret", "num_nonrel_judged_ret"}

# kinds of difference of bugs fixed in slotwise (see the module docstring)
RELSTRING_NEGATIVE = "relstring of a negative label"
RNDCG_LEVEL = "Rndcg ignores -l"
KNOWN: set[str] = set()

Qrels = dict[str, dict[str, int]]
Run = dict[str, list[tuple[str, str]]]  # qid -> [(docno, score as written)]


# --------------------------------------------------------------------------- data


@dataclass
class Collection:
    """Seeded random qrels and run, as written to the TREC files."""

    qrels: Qrels
    run: Run
    missing: set[str] = field(default_factory=set)  # qrels queries without run lines
    extra: set[str] = field(default_factory=set)  # run queries without qrels


def _doc_name(j: int) -> str:
    # byte order differs from numeric order, and capitals sort before lower case
    return (f"d{j}", f"D{j}", f"doc-{j:03d}", f"d{j}x")[j % 4]


def random_collection(seed: int, queries: int, *, negative_labels: bool = True) -> Collection:
    """``queries`` qrels queries, and a few run-only ones, exercising trec_eval's edge
    cases (see the module docstring); ``negative_labels=False`` leaves out labels < 0."""
    rng = np.random.default_rng(seed)
    names = [_doc_name(j) for j in range(200)]
    grades = [-2, -1, 0, 0, 0, 1, 1, 2, 3] if negative_labels else [0, 0, 0, 1, 1, 2, 3]
    qrels: Qrels = {}
    run: Run = {}
    missing: set[str] = set()
    for q in range(queries):
        qid = f"{seed % 1000}-{q}" if q % 3 else f"Q{q}"
        pool = [names[j] for j in rng.permutation(len(names))[:150]]
        n_judged = int(rng.integers(1, 45))
        labels = rng.choice(grades, size=n_judged)
        if rng.random() < 0.1:  # no relevant document
            labels = np.minimum(labels, 0)
        if labels.max() < 0:  # trec_eval 9 crashes when every label is negative
            labels[0] = 0
        qrels[qid] = {pool[j]: int(g) for j, g in enumerate(labels)}
        if rng.random() < 0.06:  # the run lacks the query: trec_eval's empty run
            missing.add(qid)
            continue
        # some of the judged documents, then some never judged (pool[n_judged:])
        judged = list(rng.permutation(n_judged)[: int(rng.integers(0, n_judged + 1))])
        unjudged = list(range(n_judged, n_judged + int(rng.integers(0, 90))))
        docs = [pool[j] for j in rng.permutation(judged + unjudged or [0])]
        if rng.random() < 0.05:  # one score for all: trec_eval's docno order alone
            scores = ["1.5"] * len(docs)
        else:
            scores = [f"{s:.1f}" for s in rng.normal(size=len(docs))]
        run[qid] = list(zip(docs, scores, strict=True))
    extra = {f"x{seed % 1000}-{e}" for e in range(max(1, queries // 30))}
    for qid in sorted(extra):  # run queries without judgements: ignored
        run[qid] = [(names[j], f"{rng.normal():.1f}") for j in range(int(rng.integers(1, 20)))]
    return Collection(qrels, run, missing, extra)


def write_files(
    collection: Collection, directory: Path, seed: int, separator: str = " "
) -> tuple[Path, Path]:
    """The collection as a qrels and a run file; run lines shuffled across queries, with a
    rank column unrelated to the order (trec_eval ignores it)."""
    rng = np.random.default_rng(seed + 1)
    qrels_path, run_path = directory / "qrels.txt", directory / "run.txt"
    qrels_lines = [
        separator.join((qid, "0", doc, str(label)))
        for qid, labels in collection.qrels.items()
        for doc, label in labels.items()
    ]
    run_lines = [
        separator.join((qid, "Q0", doc, str(rank), score, RUNID))
        for qid, ranked in collection.run.items()
        for rank, (doc, score) in enumerate(ranked)
    ]
    qrels_path.write_text("\n".join(qrels_lines) + "\n")
    run_path.write_text("\n".join(run_lines[i] for i in rng.permutation(len(run_lines))) + "\n")
    return qrels_path, run_path


def trec_order(ranked: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """trec_eval's order: score descending, ties by docno descending (strcmp)."""
    by_doc = sorted(ranked, key=lambda item: item[0], reverse=True)
    return sorted(by_doc, key=lambda item: float(item[1]), reverse=True)


# ---------------------------------------------------------------------- reference


@dataclass(frozen=True)
class Config:
    """One trec_eval invocation: ``-l``, ``-J``, ``-M``, ``-c``."""

    level: int = 1
    judged_only: bool = False
    max_docs: int | None = None
    complete: bool = False

    def options(self) -> Options:
        return Options(
            complete=self.complete,
            max_docs=self.max_docs,
            level=float(self.level),
            judged_only=self.judged_only,
        )

    def args(self) -> list[str]:
        out = ["-l", str(self.level)]
        out += ["-J"] if self.judged_only else []
        out += ["-M", str(self.max_docs)] if self.max_docs else []
        out += ["-c"] if self.complete else []
        return out


def _evaluated(collection: Collection, config: Config) -> dict[str, list[tuple[str, str]]]:
    """Per query trec_eval evaluates, its ranking after ``-M`` (before ``-J``); a query
    missing from the run (``-c``) gets trec_eval 10's one bogus document."""
    out = {}
    for qid in collection.qrels:
        if qid in collection.missing:
            if config.complete:
                out[qid] = [(DUMMY, "1.0")]
            continue
        out[qid] = trec_order(collection.run[qid])[: config.max_docs]
    return out


def ranked_values(collection: Collection, config: Config) -> dict[str, list[int | None]]:
    """Per evaluated query, the qrels value of each document trec_eval scores (after
    ``-M``, then ``-J``), None for a document absent from the qrels."""
    out = {}
    for qid, ranked in _evaluated(collection, config).items():
        values = [collection.qrels[qid].get(doc) for doc, _ in ranked]
        if config.judged_only:  # form_res_rels.c: drops every rel < 0
            values = [v for v in values if v is not None and v >= 0]
        out[qid] = values
    return out


def pytrec_reference(collection: Collection, config: Config) -> dict[str, dict[str, float]]:
    """pytrec_eval's per-query values of every measure it has, for the queries trec_eval
    evaluates under ``config`` (see the module docstring for the emulation)."""
    run = {
        qid: {doc: float(score) for doc, score in ranked}
        for qid, ranked in _evaluated(collection, config).items()
    }
    for qid in collection.extra:  # pytrec_eval, as trec_eval, ignores them
        run[qid] = {doc: float(score) for doc, score in collection.run[qid]}
    evaluator = pytrec_eval.RelevanceEvaluator(
        collection.qrels,
        set(pytrec_eval.supported_measures) - {"runid", "relstring"},
        relevance_level=config.level,
        judged_docs_only_flag=config.judged_only,
    )
    values = evaluator.evaluate(run)
    assert set(values) == set(run) - collection.extra
    for qid in collection.missing & set(values):  # trec_eval 10's clean-up of the bogus run
        values[qid]["num_ret"] = 0.0
        values[qid]["utility"] = 0.0
    return values


def _cutoffs(num_rel: int, rounding: str) -> list[int]:
    if rounding == "9":
        return [int(c * num_rel + 0.9) for c in LEVELS]
    return [int(c * num_rel) + (c * num_rel - int(c * num_rel) >= 0.5) for c in LEVELS]


def iprec_port(
    values: Sequence[int | None], num_rel: int, level: int, rounding: str
) -> list[float]:
    """trec_eval's te_calc_iprec_at_recall (m_iprec_at_recall.c), line for line, with
    trec_eval 9's ``(long)(c*R + 0.9)`` or trec_eval 10's ``lround(c*R)``."""
    rels = [-1 if v is None else (-2 if v < 0 else v) for v in values]
    cutoffs = _cutoffs(num_rel, rounding)
    out = [0.0] * len(LEVELS)
    num_ret = len(rels)
    num_rel_ret = sum(r >= level for r in rels)
    cut = len(LEVELS) - 1
    while cut >= 0 and cutoffs[cut] > num_rel_ret:
        cut -= 1
    int_precis = num_rel_ret / num_ret if num_ret else math.nan  # C's 0.0/0.0
    rel_so_far = num_rel_ret
    i = num_ret
    while i > 0 and rel_so_far > 0:
        precis = rel_so_far / i
        if int_precis < precis:
            int_precis = precis
        if rels[i - 1] >= level:
            while cut >= 0 and rel_so_far == cutoffs[cut]:
                out[cut] = int_precis
                cut -= 1
            rel_so_far -= 1
        i -= 1
    while cut >= 0:
        out[cut] = int_precis
        cut -= 1
    return out


def relstring_port(values: Sequence[int | None]) -> str:
    """trec_eval 10's relstring (m_relstring.c over form_res_rels.c's values): the label
    0..9, '>' above 9, '-' not in the qrels, '.' a negative qrels value (in the pool but
    unjudged)."""
    return "".join(
        "-" if v is None else "." if v < 0 else ">" if v > 9 else str(v) for v in values[:10]
    )


def relstring_slotwise_rule(values: Sequence[int | None]) -> str:
    """The rule slotwise applies (the known bug): '-' for -1, '.' for -2, '<' below."""
    negative = {-1: "-", -2: "."}
    return "".join(
        negative.get(v, "<") if v is not None and v < 0 else relstring_port([v])
        for v in values[:10]
    )


def unj_port(values: Sequence[int | None], k: int) -> float:
    """trec_eval 10's unj_k (m_unjudged.c): the documents of the top k absent from the
    qrels or with a negative qrels value, over k."""
    return sum(v is None or v < 0 for v in values[:k]) / k


# ------------------------------------------------------------------------ slotwise


def slotwise_output(qrels_path: Path, run_path: Path, config: Config) -> str:
    """``slotwise trec-eval -q -m all_trec`` through the library, as the CLI calls it."""
    report = trec_eval(
        engine.Engine(config={}),
        read_qrels(qrels_path),
        read_run(run_path),
        parse_measures(["all_trec"]),
        config.options(),
        runid=run_tag(run_path),
    )
    return report.render(per_query=True, summary=True).decode()


def parse_output(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str]]]:
    """trec_eval output as {qid or 'all': {measure: value text}}, plus the (measure, qid)
    sequence; checks the line format (measure padded to 22, tab, qid, tab, value)."""
    table: dict[str, dict[str, str]] = {}
    order = []
    for line in text.splitlines():
        name, qid, value = line.split("\t")
        measure = name.rstrip(" ")
        assert name == f"{measure:<22}", line
        assert measure not in table.setdefault(qid, {}), f"{measure} {qid} printed twice"
        table[qid][measure] = value
        order.append((measure, qid))
    return table, order


# ---------------------------------------------------------------------- comparison


@dataclass
class Outcome:
    """Every difference found, by kind, and counts of what was compared."""

    queries: int = 0
    failures: dict[str, list[str]] = field(default_factory=dict)
    compared: int = 0
    nan_as_zero: int = 0  # trec_eval's NaN (empty ranking), expected as slotwise's -nan
    rounding_differs: int = 0  # (query, level) where trec_eval 9 and 10 round apart

    def fail(self, kind: str, message: str) -> None:
        self.failures.setdefault(kind, []).append(message)

    def unexpected(self) -> list[str]:
        """The first differences of each kind that is not a known bug."""
        return [
            f"{kind} ({len(messages)}x): {messages[:3]}"
            for kind, messages in sorted(self.failures.items())
            if kind not in KNOWN
        ]


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _close(text: str, expected: float) -> bool:
    try:
        if math.isnan(expected):  # trec_eval's 0/0, printed -nan
            return text.strip() == "-nan"
        return abs(float(text) - expected) <= TOLERANCE
    except ValueError:
        return False


def compare(collection: Collection, config: Config, text: str) -> Outcome:
    """Compare slotwise's output with the references; returns every difference."""
    table, order = parse_output(text)
    reference = pytrec_reference(collection, config)
    rankings = ranked_values(collection, config)
    queries = sorted(reference)  # trec_eval 10 prints queries in strcmp order
    outcome = Outcome(queries=len(queries))

    printed_queries = [q for q in dict.fromkeys(q for _, q in order) if q != "all"]
    if printed_queries != queries:
        outcome.fail("queries", f"printed {printed_queries[:5]}.. expected {queries[:5]}..")
        return outcome
    if {q for _, q in order[-len(table["all"]) :]} != {"all"}:
        outcome.fail("order", "the all lines are not last")
    measure_order = [m for m, q in order if q == queries[0]]
    if any([m for m, q2 in order if q2 == q] != measure_order for q in queries[:50]):
        outcome.fail("order", "measures printed in different orders for different queries")

    pytrec_names = set(reference[queries[0]]) - SUMMARY_ONLY
    printed = set(table[queries[0]])
    if (
        printed - NOT_IN_PYTREC != pytrec_names
        or not NOT_IN_PYTREC - {"rbp", "rbp_resid"} <= printed
    ):
        outcome.fail(
            "names",
            f"slotwise only: {sorted(printed - NOT_IN_PYTREC - pytrec_names)}, "
            f"pytrec_eval only: {sorted(pytrec_names - printed)}",
        )

    column: dict[str, list[float]] = {}  # expected per-query values, for the all lines
    for qid in queries:
        ref, values = reference[qid], rankings[qid]
        got = {name: table[qid].get(name, "(missing)") for name in pytrec_names | NOT_IN_PYTREC}
        num_rel = int(ref["num_rel"])
        port9 = iprec_port(values, num_rel, config.level, "9")
        port10 = iprec_port(values, num_rel, config.level, "10")
        theirs = [ref[name] for name in IPREC]
        if not np.allclose(port9, theirs, rtol=0, atol=1e-12, equal_nan=True):
            outcome.fail("iprec port", f"{qid}: port {port9} pytrec_eval {theirs}")

        # iprec where 9 and 10 round alike: slotwise equals pytrec_eval itself
        for c, name, cut9, cut10, value in zip(
            LEVELS, IPREC, _cutoffs(num_rel, "9"), _cutoffs(num_rel, "10"), theirs, strict=True
        ):
            if cut9 != cut10:
                outcome.rounding_differs += 1
                fraction = c * num_rel - math.floor(c * num_rel)
                if not 0.1 - 1e-9 <= fraction < 0.5:
                    outcome.fail("9/10 rounding", f"{qid} {name}: c*R = {c * num_rel}")
            elif not _close(got[name], value):
                outcome.fail(f"{name} vs pytrec_eval", f"{qid}: slotwise {got[name]} {value!r}")

        expected: dict[str, float] = {}
        for name in pytrec_names:
            value = ref[name]
            if name in IPREC:
                value = port10[IPREC.index(name)]
            elif name == "11pt_avg":
                value = math.fsum(port10) / len(LEVELS)
            if math.isnan(value):  # trec_eval's 0/0 on an empty ranking: -nan, as printed
                outcome.nan_as_zero += 1
            expected[name] = value
        if qid in collection.missing:  # -c: the emulation equals an empty ranking by hand
            by_hand = dict.fromkeys(expected, 0.0)
            by_hand["num_rel"] = float(
                sum(v >= config.level for v in collection.qrels[qid].values())
            )
            if config.judged_only:  # -J removes the bogus document too: 0/0 at cutoff 0
                cutoffs = _cutoffs(int(by_hand["num_rel"]), "10")
                for name, cut in zip(IPREC, cutoffs, strict=True):
                    by_hand[name] = math.nan if cut == 0 else 0.0
                by_hand["11pt_avg"] = math.nan
            if any(not _same(v, expected[n]) for n, v in by_hand.items()):
                diff = {
                    n: (expected[n], v) for n, v in by_hand.items() if not _same(v, expected[n])
                }
                outcome.fail("-c by hand", f"{qid}: dummy run vs by hand {diff}")
        for k in (5, 10, 20):
            expected[f"unj_{k}"] = 0.0 if qid in collection.missing else unj_port(values, k)

        for name, value in expected.items():
            outcome.compared += 1
            column.setdefault(name, []).append(value)
            if _close(got[name], value):
                continue
            kind = name
            if name == "Rndcg" and config.level >= 2 and num_rel == 0 and value == 0:
                kind = RNDCG_LEVEL
            outcome.fail(kind, f"{qid} {name}: slotwise {got[name]} expected {value!r}")
        relstring = "" if qid in collection.missing else relstring_port(values)
        outcome.compared += 1
        if got["relstring"] != f"'{relstring}'":
            kind = "relstring"
            if got["relstring"] == f"'{relstring_slotwise_rule(values)}'":
                kind = RELSTRING_NEGATIVE
            outcome.fail(kind, f"{qid}: slotwise {got['relstring']} trec_eval '{relstring}'")
        for name in ("gm_map", "gm_bpref"):  # pytrec_eval's: log(max(value, 1e-5))
            column.setdefault(name, []).append(ref[name])

    summary = table["all"]
    expected_all = {"runid": RUNID, "num_q": str(len(queries))}
    for name, text in expected_all.items():
        if summary.get(name) != text:
            outcome.fail(name, f"all: slotwise {summary.get(name)} expected {text}")
    if set(summary) != set(column) | set(expected_all) | {"rbp", "rbp_resid"}:
        outcome.fail("all", f"all lines {sorted(summary)}, expected {sorted(column)}")
    for name, values_ in column.items():
        if name == "num_rel" and config.complete:  # trec_eval 10's te_calc_avg_num_rel
            value = sum(v > 0 for labels in collection.qrels.values() for v in labels.values())
        elif name in SUMMED:
            value = math.fsum(values_)
        elif name.startswith("gm_"):
            value = math.exp(math.fsum(values_) / len(values_))
        else:
            value = math.fsum(values_) / len(values_)
        outcome.compared += 1
        if name in summary and not _close(summary[name], value):
            kind = RNDCG_LEVEL if name == "Rndcg" and RNDCG_LEVEL in outcome.failures else name
            outcome.fail(kind, f"all {name}: slotwise {summary[name]} expected {value!r}")
    return outcome


# --------------------------------------------------------------------------- tests

# name: (seed, queries, config, negative labels)
CONFIGS: dict[str, tuple[int, int, Config, bool]] = {
    "l1": (1101, 2500, Config(level=1), True),
    "l2-M25": (1102, 1500, Config(level=2, max_docs=25), True),
    "l2": (1103, 800, Config(level=2), True),
    "l3-M7": (1104, 800, Config(level=3, max_docs=7), True),
    "c-l1": (1105, 1500, Config(level=1, complete=True), True),
    "c-l2-M30": (1106, 1000, Config(level=2, complete=True, max_docs=30), True),
    # -J on qrels without negative labels: the -J bug with negative labels aside
    "J-l1": (1107, 1000, Config(level=1, judged_only=True), False),
    "J-l2-c": (1108, 800, Config(level=2, judged_only=True, complete=True), False),
}
# the CLI run: slotwise trec-eval -q -m all_trec -l 2 -J -c (files with two spaces
# between fields, which the line-by-line reader reads)
CLI = (1110, 1000, Config(level=2, judged_only=True, complete=True), False)
# configurations that the fixed -J bugs used to fail
FIXED: dict[str, tuple[int, int, Config, bool]] = {
    "J-negative-labels": (1111, 600, Config(level=1, judged_only=True), True),
    "J-M10": (1112, 600, Config(level=1, judged_only=True, max_docs=10), False),
}
SLOW = {
    f"slow-{name}": (seed + 1000, 6_000, config, negative)
    for name, (seed, _, config, negative) in CONFIGS.items()
    if name in ("l1", "c-l2-M30", "J-l1")
}

_OUTCOMES: dict[str, tuple[Collection, Outcome]] = {}
OutcomeOf = Callable[[str], tuple[Collection, Outcome]]


def _outcome(
    name: str, spec: tuple[int, int, Config, bool], directory: Path
) -> tuple[Collection, Outcome]:
    """The collection and comparison of one configuration, computed once per session."""
    if name not in _OUTCOMES:
        seed, queries, config, negative = spec
        collection = random_collection(seed, queries, negative_labels=negative)
        qrels_path, run_path = write_files(collection, directory, seed)
        text = slotwise_output(qrels_path, run_path, config)
        _OUTCOMES[name] = collection, compare(collection, config, text)
    return _OUTCOMES[name]


@pytest.fixture
def outcome_of(
    tmp_path_factory: pytest.TempPathFactory,
) -> OutcomeOf:
    def get(name: str) -> tuple[Collection, Outcome]:
        spec = {**CONFIGS, **FIXED, **SLOW}[name]
        return _outcome(name, spec, tmp_path_factory.mktemp(name))

    return get


def _check(collection: Collection, outcome: Outcome, spec: tuple[int, int, Config, bool]) -> None:
    _, queries, config, negative = spec
    assert outcome.unexpected() == []
    # every line of every evaluated query was compared
    evaluated = queries - (0 if config.complete else len(collection.missing))
    assert outcome.queries == evaluated
    assert outcome.compared >= evaluated * 90
    # the data held what the configuration is meant to exercise
    assert collection.missing and collection.extra
    assert any(len({s for _, s in r}) < len(r) for r in collection.run.values())
    assert any(max(labels.values()) < config.level for labels in collection.qrels.values())
    assert negative == any(min(labels.values()) < 0 for labels in collection.qrels.values())
    assert outcome.rounding_differs > 0  # trec_eval 9 and 10 iprec cutoffs did differ
    assert (outcome.nan_as_zero > 0) == config.judged_only  # empty rankings only from -J


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_all_trec_matches_pytrec_eval(name: str, outcome_of: OutcomeOf) -> None:
    """Every per-query and all line of -m all_trec, for one configuration of -l/-J/-M/-c."""
    collection, outcome = outcome_of(name)
    _check(collection, outcome, CONFIGS[name])


@pytest.mark.slow
def test_cli_matches_pytrec_eval(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``slotwise trec-eval -q -m all_trec -l 2 -J -c QRELS RUN`` (the command line, and a
    file layout read line by line)."""
    seed, queries, config, negative = CLI
    collection = random_collection(seed, queries, negative_labels=negative)
    qrels_path, run_path = write_files(collection, tmp_path, seed, separator="  ")
    code = main(
        ["trec-eval", "-q", "-m", "all_trec", *config.args(), str(qrels_path), str(run_path)]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    outcome = compare(collection, config, captured.out)
    _check(collection, outcome, CLI)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW))
def test_all_trec_matches_pytrec_eval_large(name: str, outcome_of: OutcomeOf) -> None:
    """Three of the configurations above on 6,000 other queries each."""
    collection, outcome = outcome_of(name)
    _check(collection, outcome, SLOW[name])


def test_known_differences_are_only_the_known_bugs(outcome_of: OutcomeOf) -> None:
    """relstring matches everywhere, also for negative labels, and Rndcg at every -l."""
    for name in CONFIGS:
        _, outcome = outcome_of(name)
        assert RELSTRING_NEGATIVE not in outcome.failures, name
        assert RNDCG_LEVEL not in outcome.failures, name


# ---------------------------------------------------------------- bugs found, fixed


def _minimal(
    tmp_path: Path, qrels: str, run: str, measures: list[str], options: Options
) -> dict[str, str]:
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / "run").write_text(run)
    report = trec_eval(
        engine.Engine(config={}),
        read_qrels(tmp_path / "qrels"),
        read_run(tmp_path / "run"),
        parse_measures(measures),
        options,
    )
    table, _ = parse_output(report.render(per_query=True, summary=False).decode())
    return table["q"]


def test_judged_only_drops_negative_labels(tmp_path: Path) -> None:
    """qrels: a=1, n=-1; run: n (2.0), a (1.0); -J. trec_eval (pytrec_eval): num_ret 1,
    P_1 1.0 (slotwise printed num_ret 2, P_1 0.0 before the fix)."""
    got = _minimal(
        tmp_path,
        "q 0 a 1\nq 0 n -1\n",
        "q Q0 n 1 2.0 t\nq Q0 a 2 1.0 t\n",
        ["num_ret", "P.1"],
        Options(judged_only=True),
    )
    theirs = pytrec_eval.RelevanceEvaluator(
        {"q": {"a": 1, "n": -1}}, {"num_ret", "P.1"}, judged_docs_only_flag=True
    ).evaluate({"q": {"n": 2.0, "a": 1.0}})["q"]
    assert theirs == {"num_ret": 1.0, "P_1": 1.0}
    assert got == {"num_ret": "1", "P_1": "1.0000"}


def test_max_docs_cuts_before_judged_only(tmp_path: Path) -> None:
    """qrels: a=1; run: x (2.0, unjudged), a (1.0); -J -M 1. trec_eval: the top 1 is x,
    dropped: num_ret 0, P_1 0 (slotwise printed num_ret 1, P_1 1 before the fix)."""
    got = _minimal(
        tmp_path,
        "q 0 a 1\n",
        "q Q0 x 1 2.0 t\nq Q0 a 2 1.0 t\n",
        ["num_ret", "P.1"],
        Options(judged_only=True, max_docs=1),
    )
    theirs = pytrec_eval.RelevanceEvaluator(
        {"q": {"a": 1}}, {"num_ret", "P.1"}, judged_docs_only_flag=True
    ).evaluate({"q": {"x": 2.0}})["q"]  # -M 1 emulated: the run cut to its first document
    assert theirs == {"num_ret": 0.0, "P_1": 0.0}
    assert got == {"num_ret": "0", "P_1": "0.0000"}


def test_relstring_of_negative_labels(tmp_path: Path) -> None:
    """qrels: a=1, n=-1, m=-3; run: n (3.0), m (2.0), a (1.0), x (0.5).
    trec_eval 10: '..1-' (slotwise printed '-<1-' before the fix)."""
    got = _minimal(
        tmp_path,
        "q 0 a 1\nq 0 n -1\nq 0 m -3\n",
        "q Q0 n 1 3.0 t\nq Q0 m 2 2.0 t\nq Q0 a 3 1.0 t\nq Q0 x 4 0.5 t\n",
        ["relstring"],
        Options(),
    )
    assert got == {"relstring": "'..1-'"}


def test_rndcg_is_zero_without_relevant_documents_at_the_level(tmp_path: Path) -> None:
    """qrels: a=1, b=0; run: a (2.0), b (1.0); -l 2. trec_eval (pytrec_eval): Rndcg 0
    (slotwise printed 1.0000 before the fix)."""
    got = _minimal(
        tmp_path,
        "q 0 a 1\nq 0 b 0\n",
        "q Q0 a 1 2.0 t\nq Q0 b 2 1.0 t\n",
        ["Rndcg"],
        Options(level=2.0),
    )
    theirs = pytrec_eval.RelevanceEvaluator(
        {"q": {"a": 1, "b": 0}}, {"Rndcg"}, relevance_level=2
    ).evaluate({"q": {"a": 2.0, "b": 1.0}})["q"]
    assert theirs == {"Rndcg": 0.0}
    assert got == {"Rndcg": "0.0000"}


def test_judged_only_with_negative_labels_random(outcome_of: OutcomeOf) -> None:
    """-J on the random data with negative labels: every line should match."""
    collection, outcome = outcome_of("J-negative-labels")
    _check(collection, outcome, FIXED["J-negative-labels"])


def test_judged_only_with_max_docs_random(outcome_of: OutcomeOf) -> None:
    """-J -M 10 on random data (no negative labels): every line should match."""
    collection, outcome = outcome_of("J-M10")
    _check(collection, outcome, FIXED["J-M10"])


def test_relstring_random(outcome_of: OutcomeOf) -> None:
    _, outcome = outcome_of("l1")
    assert RELSTRING_NEGATIVE not in outcome.failures


def test_rndcg_random(outcome_of: OutcomeOf) -> None:
    _, outcome = outcome_of("l2-M25")
    assert RNDCG_LEVEL not in outcome.failures
