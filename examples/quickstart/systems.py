"""Two small retrievers over the Fernway help-center corpus (``corpus.jsonl``).

Both are deterministic and use only the standard library, so the example runs anywhere
slotwise does:

``bm25(input)``
    Plain Okapi BM25 (k1=1.2, b=0.75, Lucene's IDF) over lowercase alphanumeric tokens,
    no stemming, no stopword list. Returns the top 10 of its 30 best candidates.

``hybrid_rerank(input)``
    A two-stage system: the same BM25 proposes 30 candidates (its ``pool``), and a
    reranker reorders them with better lexical evidence: prefix stemming, stopword
    removal, a small hand-written synonym table (the kind a support team keeps:
    "declined" ~ "fails", "customs" ~ "duties"), coverage of the query's content terms
    weighted by IDF, and overlap of adjacent-term bigrams. It cannot recover a passage
    that BM25 did not put in the pool; that is what the pool is reported for.

Each takes a sample's ``input`` (``{"question": ...}``) and returns an ``actual_output``::

    {"retrieved": [{"id": "doc-001", "text": "...", "score": 7.31}, ...],  # rank 1 first
     "pool": ["doc-001", "doc-006", ...]}                                  # the candidates

Scoring saved outputs (what ``make demo`` does)::

    cd examples/quickstart
    slotwise run quickstart --outputs outputs/bm25.json
    slotwise run quickstart --outputs outputs/hybrid-rerank.json

Calling a system directly through the Python API (from this folder, where
``Engine.from_config()`` finds ``slotwise.yaml`` as the CLI does)::

    import engine
    import systems

    results = (
        engine.Engine.from_config().dataset("quickstart")
        .with_metrics(["retrieval-recall-at-k", "retrieval-mrr", "retrieval-ndcg-at-k@10"])
        .run(systems.bm25)
    )
    print(results.summary())

Regenerating ``outputs/bm25.json`` and ``outputs/hybrid-rerank.json`` from
``dataset.yaml`` (PyYAML is needed only for this, and slotwise already depends on it)::

    python systems.py
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPUS_PATH = HERE / "corpus.jsonl"
DATASET_PATH = HERE / "dataset.yaml"
OUTPUTS_DIR = HERE / "outputs"

TOP_K = 10  # passages returned ("retrieved")
POOL_SIZE = 30  # BM25 candidates ("pool"); the reranker chooses among these only

_TOKEN = re.compile(r"[a-z0-9]+")

# -- corpus and analysis ----------------------------------------------------------------


@cache
def load_corpus(path: Path = CORPUS_PATH) -> tuple[tuple[str, str], ...]:
    """(id, text) for every passage, in file order."""
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return tuple((str(row["id"]), str(row["text"])) for row in rows)


def tokenize(text: str) -> list[str]:
    """Lowercase alphanumeric runs: ``"Wi-Fi 2.4 GHz"`` -> ``["wi", "fi", "2", "4", "ghz"]``."""
    return _TOKEN.findall(text.lower())


_STOPWORD_LIST = """a about after again all also am an and any are as at be been before being both but
    by can could did do does doing for from get got had has have how i if in into is it its
    just me more most my no not of on once one only or other our out own same should so
    some such than that the their them then there these they this those to too under
    until up very was we were what when where which while who why will with would you
    your yours"""
STOPWORDS = frozenset(_STOPWORD_LIST.split())

# Query-side synonyms: a query term on the left also looks for the terms on the right
# (all already stemmed). Hand-written, small, and deliberately incomplete.
SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "money": ("refun",),
    "decli": ("fail", "faile"),
    "custo": ("dutie", "impor"),
    "disco": ("offli",),
    "set": ("turne",),
    "wrong": ("faile", "attem"),
    "parce": ("packa",),
    "crack": ("damag",),
    "wipe": ("reset", "facto"),
    "famil": ("house", "membe"),
    "europ": ("eu",),
    "ident": ("dupli",),
}


def stem(token: str) -> str:
    """Prefix stemming: drop a plural ``s``, then keep the first five characters
    (``delivered``, ``delivery`` -> ``deliv``). Crude, but a known strong baseline."""
    if len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        token = token[:-1]
    return token[:5]


def content_terms(text: str) -> list[str]:
    """Stemmed tokens without stopwords, in order."""
    return [stem(t) for t in tokenize(text) if t not in STOPWORDS]


# -- BM25 -------------------------------------------------------------------------------


class BM25:
    """Okapi BM25 over pre-analysed documents (Lucene's non-negative IDF)."""

    def __init__(
        self,
        docs: Sequence[tuple[str, str]],
        analyze: Callable[[str], list[str]] = tokenize,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        self.analyze = analyze
        self.k1, self.b = k1, b
        self.ids = [doc_id for doc_id, _ in docs]
        self.tf = [Counter(analyze(text)) for _, text in docs]
        self.length = [sum(tf.values()) for tf in self.tf]
        self.avg_length = sum(self.length) / len(self.length)
        df: Counter[str] = Counter()
        for tf in self.tf:
            df.update(tf.keys())
        n = len(docs)
        self.idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def score_terms(self, terms: Iterable[str]) -> list[float]:
        """One BM25 score per document for already-analysed query terms."""
        query = Counter(terms)
        scores = []
        for tf, length in zip(self.tf, self.length, strict=True):
            norm = self.k1 * (1 - self.b + self.b * length / self.avg_length)
            score = 0.0
            for term, count in query.items():
                f = tf.get(term)
                if f:
                    score += count * self.idf[term] * f * (self.k1 + 1) / (f + norm)
            scores.append(score)
        return scores

    def search(self, text: str, n: int) -> list[tuple[str, float]]:
        """The ``n`` best (id, score) with a positive score; ties broken by id."""
        scores = self.score_terms(self.analyze(text))
        ranked = sorted(
            ((doc_id, s) for doc_id, s in zip(self.ids, scores, strict=True) if s > 0),
            key=lambda pair: (-pair[1], pair[0]),
        )
        return ranked[:n]


@cache
def _bm25_index() -> BM25:
    return BM25(load_corpus())


@cache
def _content_index() -> BM25:
    return BM25(load_corpus(), analyze=content_terms)


@cache
def _texts() -> dict[str, str]:
    return dict(load_corpus())


def _question(input: Any) -> str:
    if isinstance(input, Mapping):
        return str(input["question"])
    return str(input)


def _actual_output(ranked: Sequence[tuple[str, float]], pool: Sequence[str]) -> dict[str, Any]:
    texts = _texts()
    return {
        "retrieved": [
            {"id": doc_id, "text": texts[doc_id], "score": round(score, 4)}
            for doc_id, score in ranked[:TOP_K]
        ],
        "pool": list(pool),
    }


# -- the two systems --------------------------------------------------------------------


def bm25(input: Any) -> dict[str, Any]:
    """BM25 top 10 for ``input["question"]``; the pool is its top 30."""
    candidates = _bm25_index().search(_question(input), POOL_SIZE)
    return _actual_output(candidates, [doc_id for doc_id, _ in candidates])


def _bigrams(terms: Sequence[str]) -> set[tuple[str, str]]:
    return set(pairwise(terms))


def hybrid_rerank(input: Any) -> dict[str, Any]:
    """BM25 proposes 30 candidates; a lexical reranker orders them."""
    question = _question(input)
    candidates = _bm25_index().search(question, POOL_SIZE)
    pool = [doc_id for doc_id, _ in candidates]
    if not candidates:
        return _actual_output([], pool)

    index = _content_index()
    texts = _texts()
    q_terms = content_terms(question)
    expanded = list(q_terms)
    for term in q_terms:
        expanded.extend(SYNONYMS.get(term, ()))
    q_set = set(expanded)
    q_bigrams = _bigrams(q_terms)
    idf = index.idf
    q_weight = sum(idf.get(t, 0.0) for t in q_set) or 1.0

    position = {doc_id: i for i, doc_id in enumerate(index.ids)}
    all_scores = index.score_terms(expanded)
    first_stage = {doc_id: s for doc_id, s in candidates}
    top_first = candidates[0][1]
    top_content = max(all_scores[position[d]] for d in pool) or 1.0

    reranked = []
    for doc_id in pool:
        d_terms = content_terms(texts[doc_id])
        d_set = set(d_terms)
        coverage = sum(idf.get(t, 0.0) for t in q_set & d_set) / q_weight
        bigram = len(q_bigrams & _bigrams(d_terms)) / len(q_bigrams) if q_bigrams else 0.0
        score = (
            0.35 * all_scores[position[doc_id]] / top_content
            + 0.15 * first_stage[doc_id] / top_first
            + 0.35 * coverage
            + 0.15 * bigram
        )
        reranked.append((doc_id, score))
    reranked.sort(key=lambda pair: (-pair[1], pair[0]))
    return _actual_output(reranked, pool)


SYSTEMS: Mapping[str, Callable[[Any], dict[str, Any]]] = {
    "bm25": bm25,
    "hybrid-rerank": hybrid_rerank,
}


def main() -> None:
    """Write outputs/<system>.json ({sample_id: actual_output}) for every sample."""
    import yaml

    with open(DATASET_PATH, encoding="utf-8") as handle:
        samples = yaml.safe_load(handle)["samples"]
    OUTPUTS_DIR.mkdir(exist_ok=True)
    for name, system in SYSTEMS.items():
        outputs = {str(sample["id"]): system(sample["input"]) for sample in samples}
        path = OUTPUTS_DIR / f"{name}.json"
        path.write_text(json.dumps(outputs, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {path.relative_to(HERE)} ({len(outputs)} samples)")


if __name__ == "__main__":
    main()
