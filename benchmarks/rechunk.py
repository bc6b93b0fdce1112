"""Labels that survive re-chunking, measured on real chunkers (issue 62).

Two corpora, each split into source pages whose old passages carry offsets:

- ``quickstart``: the 99 passages of ``examples/quickstart/corpus.jsonl``, six to a page
  in file order (the passages are the old chunking), and its 46 questions;
- ``manual``: a larger text this script makes (reproducibly, from one seed; it is
  synthetic, written by templates, and the project dedicates it to the public domain):
  a product manual of 60 pages, ~1,400 characters each, whose paragraphs are the old
  chunking, and 120 questions, two per page, each asked of one fact.

The stand-in judge (``engine.annotate.stand_in``, UMBRELA prompt, over HTTP through
``slotwise annotate --task relevance --judge umbrela``) labels the pool of the old runs
(four lexical retrievers, depth 30). Each corpus is then re-chunked by LangChain's
``RecursiveCharacterTextSplitter`` and LlamaIndex's ``SentenceSplitter`` at two sizes
each, and the four retrievers run over the new chunks. The old labels are carried to the
new chunks by ``slotwise relabel``'s rule (no judge call), and, to check them, the
stand-in judges the new runs' pools afresh (depth 10). Reported per chunking: judged@10
of each retriever under the relabelled labels, its nDCG@10 under both labellings,
Kendall's tau of the systems' order, and the per-query differences.

    python benchmarks/rechunk.py [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart"
sys.path.insert(0, str(QUICKSTART))

import systems  # noqa: E402  (the quickstart's retrievers)

from engine.analysis.relabel import relabel_dataset  # noqa: E402
from engine.io.spans import Chunk, align  # noqa: E402

PER_PAGE = 6  # quickstart passages per source page
OLD_DEPTH = 30  # the old runs' pool depth the judge labelled
NEW_DEPTH = 10  # the new runs' pool depth judged afresh (the check)
METRIC = "retrieval-ndcg-at-k@10"
#: (splitter, size, overlap): LangChain's sizes in characters, LlamaIndex's in words
CHUNKINGS = (
    ("langchain", 150, 30),
    ("langchain", 400, 40),
    ("llamaindex", 40, 5),
    ("llamaindex", 80, 10),
)

Corpus = tuple[dict[str, str], list[Chunk], dict[str, str]]  # pages, old passages, questions


# -- corpora -------------------------------------------------------------------------------


def quickstart() -> Corpus:
    """The quickstart's passages six to a page (joined by a blank line), its questions."""
    import yaml

    rows = systems.load_corpus()
    pages: dict[str, str] = {}
    passages: list[Chunk] = []
    for first in range(0, len(rows), PER_PAGE):
        page = f"page-{first // PER_PAGE + 1:02d}"
        text, start = "", 0
        for doc_id, passage in rows[first : first + PER_PAGE]:
            if text:
                text += "\n\n"
            start = len(text)
            text += passage
            passages.append(Chunk(doc_id, passage, page, start, start + len(passage)))
        pages[page] = text
    samples = yaml.safe_load((QUICKSTART / "dataset.yaml").read_text())["samples"]
    return pages, passages, {s["id"]: s["input"]["question"] for s in samples}


_PARTS = ("ar", "bel", "cor", "dan", "el", "fen", "gal", "hol", "is", "jor", "kal", "lum")
_PLACES = ("kitchen", "garage", "attic", "basement", "office", "nursery", "porch", "studio")
_FACTS = (
    (
        "The {p} battery lasts {n} hours on a full charge.",
        "How many hours does the {p} battery last on a full charge?",
    ),
    ("The {p} comes with a {n}-year limited warranty.", "How long is the {p} warranty?"),
    (
        "Firmware for the {p} is released every {n} weeks through the mobile app.",
        "How often is new firmware released for the {p}?",
    ),
    (
        "The {p} supports up to {n} linked sensors per household.",
        "How many sensors can be linked to one {p}?",
    ),
    (
        "Installing the {p} takes about {n} minutes with the supplied bracket.",
        "How long does installing the {p} take?",
    ),
    (
        "The {p} is rated for temperatures down to minus {n} degrees.",
        "What is the lowest temperature the {p} is rated for?",
    ),
    (
        "Replacement filters for the {p} cost {n} dollars each.",
        "How much does a replacement filter for the {p} cost?",
    ),
    (
        "The {p} display dims after {n} seconds without a touch.",
        "When does the {p} display dim?",
    ),
)
_FILLER = (
    "Most owners place it in the {w}, away from direct sunlight.",
    "Keep the vents clear of dust so that readings stay accurate.",
    "The status light blinks green while the device pairs with your phone.",
    "Our support team can walk you through setup over a video call.",
    "Every unit is tested at the factory before it ships.",
    "Cleaning the housing with a dry cloth once a month is enough.",
    "The device keeps working during an internet outage and syncs when it is back.",
    "Customers in the {w} report the quietest operation.",
    "Accessories are sold separately in the online store.",
    "The manual's last page lists the regulatory notices for your region.",
)


def manual(pages: int = 60, seed: int = 0) -> Corpus:
    """The synthetic manual: a page per product, paragraphs of facts and filler (the old
    passages), two questions per page, each asked of one of its facts."""
    rng = random.Random(seed)
    texts: dict[str, str] = {}
    passages: list[Chunk] = []
    questions: dict[str, str] = {}
    names: set[str] = set()
    for number in range(1, pages + 1):
        while (name := "".join(rng.sample(_PARTS, 2)).capitalize()) in names:
            pass
        names.add(name)
        product = f"{name} {rng.choice(('thermostat', 'sensor', 'hub', 'purifier'))}"
        facts = rng.sample(_FACTS, 6)
        sentences = [fact.format(p=product, n=rng.randint(2, 90)) for fact, _ in facts]
        for line in rng.sample(_FILLER, 6):
            sentences.insert(rng.randrange(len(sentences) + 1), line.format(w=rng.choice(_PLACES)))
        page = f"manual-{number:02d}"
        text = f"{product}\n\n"
        for first in range(0, len(sentences), 3):
            paragraph = " ".join(sentences[first : first + 3])
            start = len(text)
            text += paragraph + "\n\n"
            passages.append(
                Chunk(f"{page}-p{first // 3 + 1}", paragraph, page, start, start + len(paragraph))
            )
        texts[page] = text.rstrip("\n")
        for index, (_, question) in enumerate(facts[:2]):
            questions[f"{page}-q{index + 1}"] = question.format(p=product)
    return texts, passages, questions


# -- chunkers and retrievers --------------------------------------------------------------


def rechunk(pages: Mapping[str, str], splitter: str, size: int, overlap: int) -> list[Chunk]:
    """The pages chunked by a framework's splitter; ids ``PAGE#SPLITTER-SIZE-N``."""
    chunks = []
    if splitter == "langchain":
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        split = RecursiveCharacterTextSplitter(
            chunk_size=size, chunk_overlap=overlap, add_start_index=True
        )
        for page, text in pages.items():
            for n, doc in enumerate(split.create_documents([text], metadatas=[{"source": page}])):
                record = {"id": f"{page}#lc{size}-{n}", "page_content": doc.page_content}
                chunks.append(_chunk(record | {"metadata": doc.metadata}))
    else:
        from llama_index.core import Document
        from llama_index.core.node_parser import SentenceSplitter

        # words as tokens: the default tokenizer (tiktoken) downloads its vocabulary
        split = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=str.split)
        for page, text in pages.items():
            nodes = split.get_nodes_from_documents([Document(text=text, id_=page)])
            for n, node in enumerate(nodes):
                node.id_ = f"{page}#li{size}-{n}"
                chunks.append(_chunk(node))
    return chunks


def _chunk(record: Any) -> Chunk:
    from engine.io.spans import chunk_of

    return chunk_of(record)


def _lead(text: str) -> list[str]:
    return systems.tokenize(text)[:10]


#: name -> (analyzer, k1, b)
RETRIEVERS: Mapping[str, tuple[Callable[[str], list[str]], float, float]] = {
    "bm25": (systems.tokenize, 1.2, 0.75),
    "bm25-stemmed": (systems.content_terms, 1.2, 0.75),
    "bm25-b0": (systems.tokenize, 1.2, 0.0),
    "lead-bm25": (_lead, 1.2, 0.75),
}


def runs(chunks: Sequence[Chunk], questions: Mapping[str, str], depth: int) -> dict[str, dict]:
    """Per retriever, the outputs file's mapping: top ``depth`` with texts per question."""
    texts = {c.id: c.text for c in chunks}
    found = {}
    for name, (analyze, k1, b) in RETRIEVERS.items():
        index = systems.BM25([(c.id, c.text) for c in chunks], analyze=analyze, k1=k1, b=b)
        found[name] = {
            q: {
                "retrieved": [
                    {"id": d, "text": texts[d], "score": round(s, 4)}
                    for d, s in index.search(question, depth)
                ]
            }
            for q, question in questions.items()
        }
    return found


# -- the judge -----------------------------------------------------------------------------


@contextlib.contextmanager
def stand_in() -> Iterator[str]:
    """The stand-in judge's base URL while it runs."""
    process = subprocess.Popen(
        [sys.executable, "-m", "engine.annotate.stand_in", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().split()[1])
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(10)


def judge(
    url: str, questions: Mapping[str, str], outputs: Mapping[str, dict], depth: int, folder: Path
) -> list[dict[str, Any]]:
    """``slotwise annotate --task relevance --judge umbrela`` over the pool of ``outputs``
    (to ``depth``): the labelled samples."""
    from engine.cli import main

    dataset = folder / "questions.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"id": q, "input": {"question": t}}) + "\n" for q, t in questions.items()
        )
    )
    paths = []
    for name, outputs_of in outputs.items():
        paths.append(folder / f"{name}.json")
        paths[-1].write_text(json.dumps(outputs_of))
    labelled = folder / "labelled.jsonl"
    arguments = [
        "annotate", str(dataset), "--output", str(labelled), "--task", "relevance",
        "--judge", "umbrela", "--annotator", "openai-compatible", "--base-url", url,
        "--model", "stand-in", "--runs", *map(str, paths), "--depth", str(depth),
        "--concurrency", "8", "--no-progress", "--max-unlabelled", "0",
    ]  # fmt: skip
    with contextlib.redirect_stdout(sys.stderr):
        code = main(arguments)
    if code != 0:
        raise RuntimeError(f"slotwise annotate exited {code}")
    return [json.loads(line) for line in labelled.read_text().splitlines()]


# -- the measurement -----------------------------------------------------------------------


def score(
    samples: Sequence[Mapping[str, Any]], outputs: Mapping[str, Any]
) -> tuple[np.ndarray, float | None]:
    """Per-question nDCG@10 (question order of ``samples``) and judged@10."""
    import engine

    dataset = engine.dataset(samples=list(samples), name="rechunk")
    results = dataset.with_metrics([METRIC]).evaluate(dict(outputs))
    return results.values(METRIC), results.diagnostics.judged_at(10)


def _in_pool(samples: Sequence[Mapping[str, Any]], pool: Mapping[str, set[str]]) -> list[dict]:
    """The samples with their relevance cut to the chunks of ``pool``: both labellings
    then grade the same chunks, and nDCG's ideal ranking draws on the same ones."""
    found = []
    for sample in samples:
        expected = dict(sample.get("expected_output") or {})
        relevance = expected.get("relevance") or {}
        expected["relevance"] = {
            d: g for d, g in relevance.items() if d in pool.get(str(sample["id"]), ())
        }
        found.append({"id": sample["id"], "expected_output": expected})
    return found


def measure(
    corpus: Corpus,
    url: str,
    folder: Path,
    chunkings: Sequence[tuple[str, int, int]] = CHUNKINGS,
    old_depth: int | None = OLD_DEPTH,
) -> dict[str, Any]:
    """The whole experiment on one corpus: a row per chunking. ``old_depth``: the old
    runs' pool depth the judge labelled (None: every passage, for every question)."""
    from scipy.stats import kendalltau

    pages, passages, questions = corpus
    old_alignment = align(passages, pages)
    assert not old_alignment.unaligned, old_alignment.unaligned
    old_folder = folder / "old"
    old_folder.mkdir()
    if old_depth is None:
        everything = [{"id": c.id, "text": c.text} for c in passages]
        old_runs = {"every-passage": {q: {"retrieved": everything} for q in questions}}
    else:
        old_runs = runs(passages, questions, old_depth)
    started = time.perf_counter()
    old = judge(url, questions, old_runs, old_depth or len(passages), old_folder)
    old_seconds = time.perf_counter() - started
    rows = []
    for splitter, size, overlap in chunkings:
        with contextlib.redirect_stdout(sys.stderr):  # LlamaIndex prints its warnings
            chunks = rechunk(pages, splitter, size, overlap)
        alignment = align(chunks, pages)
        new_runs = runs(chunks, questions, NEW_DEPTH)
        started = time.perf_counter()
        carried = relabel_dataset(old, pages, alignment, passages=old_alignment)
        relabel_seconds = time.perf_counter() - started
        sub = folder / f"{splitter}-{size}"
        sub.mkdir()
        fresh = judge(url, questions, new_runs, NEW_DEPTH, sub)
        pool: dict[str, set[str]] = {q: set() for q in questions}
        for outputs in new_runs.values():
            for q, output in outputs.items():
                pool[q].update(item["id"] for item in output["retrieved"])
        pooled = _in_pool(carried.samples, pool)
        means: dict[str, tuple[float, float]] = {}
        judged: dict[str, float | None] = {}
        diffs = []
        for name, outputs in new_runs.items():
            _, judged[name] = score(carried.samples, outputs)
            a, _ = score(pooled, outputs)
            b, _ = score(fresh, outputs)
            means[name] = (float(np.nanmean(a)), float(np.nanmean(b)))
            diffs.append(a - b)
        signed = np.concatenate(diffs)
        signed = signed[~np.isnan(signed)]
        delta = np.abs(signed)
        tau = kendalltau([m[0] for m in means.values()], [m[1] for m in means.values()]).statistic
        rows.append(
            {
                "chunking": f"{splitter} {size}/{overlap}",
                "chunks": len(chunks),
                "aligned": alignment.counts(),
                "judged_at_10": judged,
                "ndcg_relabelled_fresh": means,
                "kendall_tau": float(tau),
                "per_query_diff_mean": float(signed.mean()),
                "per_query_abs_diff_mean": float(delta.mean()),
                "per_query_abs_diff_over_0_1": float((delta > 0.1).mean()),
                "relabel_seconds": relabel_seconds,
                "labels_carried": carried.relabelled.counts()["labels"],
                "fresh_judge_calls": sum(len(p) for p in pool.values()),
            }
        )
    return {"questions": len(questions), "pages": len(pages), "old_passages": len(passages),
            "old_depth": old_depth,
            "old_labels": sum(len(s.get("expected_output", {}).get("relevance", {})) for s in old),
            "old_judge_seconds": old_seconds, "rows": rows}  # fmt: skip


def scale(
    docs: int = 2_000, per_doc: int = 100, samples: int = 10_000, spans: int = 30, seed: int = 0
) -> dict[str, Any]:
    """Seconds :func:`relabel` takes for ``docs * per_doc`` chunks of ~300 characters
    (a 20% overlap) and ``samples * spans`` span labels of 100-600 characters."""
    from engine.analysis.relabel import relabel
    from engine.io.spans import Alignment, Span

    rng = np.random.default_rng(seed)
    placed = {
        f"d{d}#{n}": (f"d{d}", n * 240, n * 240 + 300, "offsets")
        for d in range(docs)
        for n in range(per_doc)
    }
    doc = rng.integers(0, docs, (samples, spans))
    start = rng.integers(0, per_doc * 240, (samples, spans))
    length = rng.integers(100, 600, (samples, spans))
    grade = rng.integers(0, 4, (samples, spans))
    labels = {
        f"q{q}": [
            Span(
                f"d{doc[q, i]}",
                int(start[q, i]),
                int(start[q, i] + length[q, i]),
                float(grade[q, i]),
            )
            for i in range(spans)
        ]
        for q in range(samples)
    }
    started = time.perf_counter()
    found = relabel(labels, Alignment(placed, {}))
    seconds = time.perf_counter() - started
    return {"chunks": len(placed), "span_labels": samples * spans, "seconds": seconds,
            "labels_written": found.counts()["labels"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the results as JSON here too")
    args = parser.parse_args()
    found = {}
    with stand_in() as url, tempfile.TemporaryDirectory() as tmp:
        for name, corpus in (("quickstart", quickstart()), ("manual", manual())):
            for depth in (OLD_DEPTH, None):
                key = f"{name} (old pool: {'every passage' if depth is None else f'depth {depth}'})"
                folder = Path(tmp) / f"{name}-{depth}"
                folder.mkdir()
                found[key] = measure(corpus, url, folder, old_depth=depth)
    found["scale"] = scale()
    text = json.dumps(found, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
