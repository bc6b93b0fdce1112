"""trec_eval 10's preference measures (``-R prefs``, ``-R qrels_prefs``; the ``all_prefs``
set), ported from its form_prefs_counts.c and m_prefs_*.c.

A prefs file has lines ``qid jg jsg docno rel_level``: within a judgment sub-group (jsg)
a document with a higher rel_level is preferred to one with a lower; a judgment group
(jg) gathers the sub-groups of one user's preferences. ``-R qrels_prefs`` reads a qrels
file as prefs, its second field the jg and one jsg per jg. Each query's preferences are
counted against the ranking: fulfilled or not when both documents were retrieved,
"implied" when one was, "not occurring" when neither was; the measures are ratios of
these counts.

This is a port that keeps trec_eval's loops (per query, per judgment group, per pair of
documents): preference files are small (tens of judged documents per query), and its
order of operations is what makes its numbers; it is not a hot path of slotwise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import attrs
import numpy as np
import pyarrow as pa

from engine.analysis.trec_eval import PREFS_MEASURES, Options, Report, Request, Stop, measure_lines

__all__ = [
    "PREFS_MEASURES",
    "Counts",
    "prefs_report",
    "prefs_values",
    "read_prefs",
    "read_ranked",
]


Pref = tuple[bytes, bytes, float, bytes]  # jg, jsg, rel_level, docno


def read_prefs(path: Path, qrels: bool) -> dict[str, list[Pref]]:
    """Per query, its preference lines (``qrels``: a qrels file read as prefs, its second
    field the judgment group, one sub-group)."""
    try:
        text = path.read_bytes()
    except OSError as error:
        raise Stop(f"cannot read prefs file '{path}': {error.strerror}", 2) from None
    width = 4 if qrels else 5
    found: dict[str, list[Pref]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        try:
            if len(fields) != width:
                raise ValueError
            level = float(fields[-1])
            if not math.isfinite(level):
                raise ValueError
        except ValueError:
            layout = "qid jg docno rel" if qrels else "qid jg jsg docno rel_level"
            raise Stop(f"prefs file '{path}' line {number}: expected '{layout}'", 2) from None
        if level < 0:  # trec_eval's Rnonrel measures then read past an array's end
            raise Stop(
                f"prefs file '{path}' line {number}: a negative rel_level "
                "(trec_eval's prefs_avgjg_Rnonrel then reads memory past its data)",
                2,
            )
        jsg = b"0" if qrels else fields[2]
        found.setdefault(fields[0].decode("utf-8"), []).append((fields[1], jsg, level, fields[-2]))
    if not found:
        raise Stop(f"prefs file '{path}' has no preference", 2)
    return found


@attrs.define
class Group:
    """One judgment group's counts (trec_eval's JG)."""

    fulfilled_ret: int = 0
    possible_ret: int = 0
    fulfilled_imp: int = 0
    possible_imp: int = 0
    possible_notoccur: int = 0
    rel: int = 0
    rel_ret: int = 0
    nonrel: int = 0
    nonrel_ret: int = 0
    classes: list[tuple[float, list[int]]] | None = None  # ECs: (rel_level, ranks)
    prefs: np.ndarray | None = None  # the preference array, when sub-groups
    levels: np.ndarray | None = None  # its rel_array


@attrs.define
class Counts:
    """A query's preference counts (trec_eval's RESULTS_PREFS)."""

    groups: list[Group]
    judged: int
    judged_ret: int
    pairs: np.ndarray  # counts[i][j]: judgment groups preferring i to j


def counts(prefs: Sequence[Pref], ranked: Sequence[bytes]) -> Counts:
    """trec_eval's te_form_pref_counts for one query: ``ranked`` the retrieved documents in
    its order (after ``-M``)."""
    judged_docs = {p[3] for p in prefs}
    retrieved = [d for d in ranked if d in judged_docs]
    ranks = {d: i for i, d in enumerate(retrieved)}
    judged_ret = len(retrieved)
    for doc in sorted(judged_docs - ranks.keys()):
        ranks[doc] = len(ranks)
    judged = len(ranks)
    rows = sorted(((jg, jsg, -level, ranks[doc], level) for jg, jsg, level, doc in prefs))
    pairs = np.zeros((judged, judged), dtype=np.int64)
    groups = []
    start = 0
    while start < len(rows):
        end = start
        while end < len(rows) and rows[end][0] == rows[start][0]:
            end += 1
        group = [(r[1], r[4], r[3]) for r in rows[start:end]]  # jsg, level, rank
        if len({jsg for jsg, _, _ in group}) > 1:
            groups.append(_array_group(group, judged, judged_ret, pairs))
        else:
            groups.append(_class_group(group, judged_ret, pairs))
        start = end
    return Counts(groups, judged, judged_ret, pairs)


def _class_group(
    group: list[tuple[bytes, float, int]], judged_ret: int, pairs: np.ndarray
) -> Group:
    """A judgment group of one sub-group: equivalence classes of equal rel_level
    (form_jg_ec, add_ec_pref_to_jg)."""
    classes: list[tuple[float, list[int]]] = []
    for _, level, rank in group:
        if not classes or classes[-1][0] != level:
            classes.append((level, []))
        classes[-1][1].append(rank)
    out = Group(classes=classes)
    for e1, (level, ranks1) in enumerate(classes):
        retrieved = sum(1 for r in ranks1 if r < judged_ret)
        if level > 0.0:
            out.rel_ret += retrieved
            out.rel += len(ranks1)
        else:
            out.nonrel_ret += retrieved
            out.nonrel += len(ranks1)
        for _, ranks2 in classes[e1 + 1 :]:
            for r1 in ranks1:
                for r2 in ranks2:
                    pairs[r1, r2] += 1
                    if r1 == r2:
                        raise Stop("a document occurs with two rel_levels in one jsg", 4)
                    if r1 < r2:
                        if r2 < judged_ret:
                            out.fulfilled_ret += 1
                        elif r1 < judged_ret:
                            out.fulfilled_imp += 1
                        else:
                            out.possible_notoccur += 1
                    elif r1 < judged_ret:
                        out.possible_ret += 1
                    elif r2 < judged_ret:
                        out.possible_imp += 1
                    else:
                        out.possible_notoccur += 1
    out.possible_ret += out.fulfilled_ret
    out.possible_imp += out.fulfilled_imp
    return out


def _array_group(
    group: list[tuple[bytes, float, int]], judged: int, judged_ret: int, pairs: np.ndarray
) -> Group:
    """A judgment group of several sub-groups: a preference array closed under
    transitivity (form_jg_pa, add_transitives, add_pa_pref_to_jg)."""
    a = np.zeros((judged, judged), dtype=bool)
    levels = np.full(judged, -1.0)
    for i, (jsg, level, rank) in enumerate(group):
        if (levels[rank] > 0.0 and level == 0.0) or (levels[rank] == 0.0 and level > 0.0):
            raise Stop("a document has both 0 and non-0 rel_level in one jg", 4)
        levels[rank] = level
        j = i + 1
        while j < len(group) and group[j][0] == jsg and group[j][1] == level:
            j += 1
        while j < len(group) and group[j][0] == jsg:
            a[rank, group[j][2]] = True
            j += 1
    closed = a | np.eye(judged, dtype=bool)
    while True:
        wider = (closed.astype(np.int64) @ closed.astype(np.int64)) > 0
        if (wider == closed).all():
            break
        closed = wider
    np.fill_diagonal(closed, False)
    if (closed & closed.T).any():
        raise Stop("inconsistent preferences in one jg (trec_eval aborts)", 4)
    out = Group(prefs=closed, levels=levels)
    ret, rest = slice(0, judged_ret), slice(judged_ret, judged)
    out.rel_ret = int((levels[ret] > 0.0).sum())
    out.nonrel_ret = int((levels[ret] == 0.0).sum())
    out.rel = out.rel_ret + int((levels[rest] > 0.0).sum())
    out.nonrel = out.nonrel_ret + int((levels[rest] == 0.0).sum())
    top = closed[ret, ret]
    out.possible_ret = int(np.tril(top, -1).sum())
    out.fulfilled_ret = int(np.triu(top, 1).sum())
    out.fulfilled_imp = int(closed[ret, rest].sum())
    out.possible_imp = int(closed[rest, ret].sum())
    out.possible_notoccur = int(closed[rest, rest].sum())
    pairs += closed
    out.possible_ret += out.fulfilled_ret
    out.possible_imp += out.fulfilled_imp
    return out


def _ratio(a: float, b: float) -> float:
    """C's ``a / b`` of doubles (no exception for 0)."""
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


def _pair(c: Counts, parts: str) -> float:
    """prefs_pair (parts ``rim``), _ret (``r``), _imp (``ri``): over document pairs with a
    preference, the share of judgment groups preferring the first."""
    n, r = c.judged, c.judged_ret
    p = c.pairs
    total, count = 0.0, 0
    blocks = [(range(r), lambda i: range(i + 1, r))]
    if "i" in parts:
        blocks.append((range(r), lambda i: range(r, n)))
    for rows, columns in blocks:
        for i in rows:
            for j in columns(i):
                if p[i, j] or p[j, i]:
                    count += 1
                    total += float(p[i, j]) / float(p[i, j] + p[j, i])
    if "m" in parts:
        for i in range(r, n):
            for j in range(i + 1, n):
                if p[i, j] or p[j, i]:
                    count += 1
    return total / count if count else 0.0


def _avgjg(c: Counts, ratios: Sequence[tuple[int, int]]) -> float:
    total = 0.0
    for ful, poss in ratios:
        if poss:
            total += ful / poss
    return total / len(c.groups) if total > 0.0 else 0.0


def _rnonrel(c: Counts, retrieved_only: bool) -> float:
    """prefs_avgjg_Rnonrel(_ret): as prefs_avgjg with the judgment group's non-relevant
    documents (rel_level 0) counted as many as its relevant ones."""
    total = 0.0
    for g in c.groups:
        rel, nonrel = (g.rel_ret, g.nonrel_ret) if retrieved_only else (g.rel, g.nonrel)
        if rel >= nonrel:
            ful = g.fulfilled_ret + (0 if retrieved_only else g.fulfilled_imp)
            poss = g.possible_ret
            if not retrieved_only:
                poss += g.possible_imp + g.possible_notoccur
            ful += g.rel_ret * (rel - nonrel)
            poss += g.rel * (rel - nonrel)
        else:
            ful, poss = _recalculate(g, c.judged_ret, retrieved_only)
        total += _ratio(ful, poss)
    return total / len(c.groups) if total > 0.0 else 0.0


def _recalculate(g: Group, judged_ret: int, retrieved_only: bool) -> tuple[int, int]:
    """m_prefs_avgjg_Rnonrel(_ret).c's recalculate: the counts with only the first R
    non-relevant documents (R the relevant ones)."""
    ful = poss = 0
    if g.classes is not None:
        keep = g.rel_ret if retrieved_only else g.rel
        classes = g.classes
        last = classes[-1][1][:keep]

        def count(r1: int, r2: int) -> None:
            nonlocal ful, poss
            if r1 < r2 and (retrieved_only or r1 < judged_ret):
                ful += 1
            else:
                poss += 1

        for e1 in range(len(classes)):
            for e2 in range(e1 + 1, len(classes) - 1):
                for r1 in _prefix(classes[e1][1], judged_ret, retrieved_only):
                    for r2 in _prefix(classes[e2][1], judged_ret, retrieved_only):
                        count(r1, r2)
        for e1 in range(len(classes)):
            for r1 in _prefix(classes[e1][1], judged_ret, retrieved_only):
                for r2 in _prefix(last, judged_ret, retrieved_only):
                    count(r1, r2)
        return ful, poss + ful
    a, levels = g.prefs, g.levels
    assert a is not None and levels is not None
    n = judged_ret if retrieved_only else a.shape[0]
    seen, first = 0, n
    for i in range(n):
        if levels[i] == 0.0:
            seen += 1
            if seen == g.rel + 1:
                first = i
                break
    dropped = (np.arange(a.shape[0]) >= first) & (levels == 0.0)
    kept = a & ~dropped[:, None] & ~dropped[None, :]
    ret, rest = slice(0, judged_ret), slice(judged_ret, a.shape[0])
    poss += int(np.tril(kept[ret, ret], -1).sum())
    ful += int(np.triu(kept[ret, ret], 1).sum())
    if not retrieved_only:
        ful += int(kept[ret, rest].sum())
        poss += int(kept[rest, ret].sum()) + int(kept[rest, rest].sum())
    return ful, poss + ful


def _prefix(ranks: list[int], judged_ret: int, retrieved_only: bool) -> list[int]:
    """The ranks a loop of recalculate visits: with ``retrieved_only`` those before the
    first unretrieved one (its loops stop there; the ranks ascend)."""
    if not retrieved_only:
        return ranks
    out = []
    for r in ranks:
        if r >= judged_ret:
            break
        out.append(r)
    return out


def prefs_values(c: Counts) -> dict[str, float]:
    """Every preference measure of one query."""
    g = c.groups
    ful_ret = sum(x.fulfilled_ret for x in g)
    ful_imp = sum(x.fulfilled_imp for x in g)
    poss_ret = sum(x.possible_ret for x in g)
    poss_imp = sum(x.possible_imp for x in g)
    notoccur = sum(x.possible_notoccur for x in g)
    poss = poss_ret + poss_imp + notoccur
    return {
        "prefs_num_prefs_poss": float(poss),
        "prefs_num_prefs_ful": float(ful_ret + ful_imp),
        "prefs_num_prefs_ful_ret": float(ful_ret),
        "prefs_simp": (ful_ret + ful_imp) / poss if poss else 0.0,
        "prefs_pair": _pair(c, "rim"),
        "prefs_avgjg": _avgjg(
            c,
            [
                (
                    x.fulfilled_ret + x.fulfilled_imp,
                    x.possible_ret + x.possible_imp + x.possible_notoccur,
                )
                for x in g
            ],
        ),
        "prefs_avgjg_Rnonrel": _rnonrel(c, False),
        "prefs_simp_ret": ful_ret / poss_ret if poss_ret else 0.0,
        "prefs_pair_ret": _pair(c, "r"),
        "prefs_avgjg_ret": _avgjg(c, [(x.fulfilled_ret, x.possible_ret) for x in g]),
        "prefs_avgjg_Rnonrel_ret": _rnonrel(c, True),
        "prefs_simp_imp": (ful_ret + ful_imp) / (poss_ret + poss_imp)
        if poss_ret + poss_imp
        else 0.0,
        "prefs_pair_imp": _pair(c, "ri"),
        "prefs_avgjg_imp": _avgjg(
            c, [(x.fulfilled_ret + x.fulfilled_imp, x.possible_ret + x.possible_imp) for x in g]
        ),
    }


def read_ranked(text: bytes, name: str) -> tuple[dict[str, list[bytes]], str]:
    """A run's rankings as trec_eval's preference code orders them — score descending,
    ties by doc id *ascending* (its form_prefs_counts.c compares doc ids the other way
    round from the other measures) — and the run's tag (its last line's)."""
    scored: dict[str, list[tuple[float, bytes]]] = {}
    runid = b""
    for number, raw in enumerate(text.splitlines(), start=1):
        fields = raw.split()
        if not fields or fields[0].startswith(b"#"):
            continue
        try:
            if len(fields) < 6:
                raise ValueError
            score = float(fields[4])
            if math.isnan(score):
                raise ValueError
        except ValueError:
            raise Stop(f"results file '{name}' line {number}: malformed", 2) from None
        scored.setdefault(fields[0].decode("utf-8"), []).append((-score, fields[2]))
        runid = fields[5]
    if not scored:
        raise Stop(f"results file '{name}' has no ranked document", 2)
    ranked = {qid: [doc for _, doc in sorted(pairs)] for qid, pairs in scored.items()}
    return ranked, runid.decode("utf-8", "replace")


def prefs_report(
    prefs: dict[str, list[Pref]],
    run: dict[str, list[bytes]],
    requests: Sequence[Request],
    options: Options,
    runid: str,
) -> Report:
    """The preference measures of every query of ``prefs`` (those the run has, or all of
    them with ``-c``, a missing run being an empty ranking), in query id order."""
    lines = measure_lines(requests, options.level)
    queries = sorted((q for q in prefs if options.complete or q in run), key=str.encode)
    columns: dict[str, list[float]] = {
        line.name: [] for line in lines if line.name in PREFS_MEASURES
    }
    for qid in queries:
        ranked = run.get(qid, [])
        if options.max_docs is not None:
            ranked = ranked[: options.max_docs]
        values = prefs_values(counts(prefs[qid], ranked))
        for name, column in columns.items():
            column.append(values[name])
    arrays = {name: np.asarray(column, dtype=np.float64) for name, column in columns.items()}
    return Report(tuple(lines), tuple(queries), arrays, pa.array([], pa.string()), runid)
