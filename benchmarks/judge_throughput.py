"""Judge throughput of label-free hole filling: `slotwise annotate --task relevance --runs A B
--holes` against a local OpenAI-compatible server that answers in 20 ms.

    python benchmarks/judge_throughput.py [--questions 1000] [--depth 10] [--delay 0.02]
        [--concurrency 8,32]

The data is shaped like a real pool: 1,000 questions of 8-14 words, two systems'
rankings of 20 passages each (ids from MS MARCO's 8,841,823 passages; the two systems'
top 10s share about half their passages, as a reranker's and its first stage's do), each
passage 40-80 words. The judge is the stand-in server (``engine.annotate.stand_in``, a
subprocess on 127.0.0.1, ``--delay`` seconds before each answer, as a fast model's
latency): the numbers measure slotwise's side (pooling, prompting, HTTP, strict reading,
the SQLite cache) at the chosen concurrency, not a model. For each concurrency, a fresh
cache: the distinct pooled pairs judged, model calls (one per pair), seconds and pairs
per second; then the same command again, which must make no call.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = 8_841_823
WORDS = (
    "return refund order shipping account password device thermostat warranty billing "
    "invoice plan subscription cloud api key rate limit firmware update reset wifi "
    "battery display schedule temperature sensor install support contact replacement "
    "delivery days window policy annual monthly cancel charge card payment region"
).split()


def write_inputs(folder: Path, questions: int, seed: int = 0) -> tuple[Path, Path, Path]:
    """A questions-only dataset and two outputs files with passage texts."""
    rng = random.Random(seed)

    def text(low: int, high: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))

    samples, first, second = [], {}, {}
    for i in range(questions):
        sid = f"q{i:05d}"
        samples.append({"id": sid, "input": {"question": text(8, 14) + "?"}})
        docs = [str(rng.randrange(CORPUS)) for _ in range(30)]
        texts = {d: text(40, 80) for d in docs}
        shuffled = docs[:10] + rng.sample(docs[10:], 10)  # half of its top 10 is new
        first[sid] = {"retrieved": [{"id": d, "text": texts[d]} for d in docs[:20]]}
        second[sid] = {
            "retrieved": [{"id": d, "text": texts[d]} for d in rng.sample(shuffled[:10], 5)]
            + [{"id": d, "text": texts[d]} for d in shuffled[10:]]
            + [{"id": d, "text": texts[d]} for d in docs[20:25]]
        }
    dataset = folder / "questions.jsonl"
    dataset.write_text("".join(json.dumps(s) + "\n" for s in samples))
    paths = folder / "first.json", folder / "second.json"
    for path, run in zip(paths, (first, second), strict=True):
        path.write_text(json.dumps(run))
    return dataset, *paths


def start_server(delay: float) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, "-m", "engine.annotate.stand_in", "--delay", str(delay)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert process.stdout is not None
    port = int(process.stdout.readline().split()[1])
    return process, f"http://127.0.0.1:{port}/v1"


def annotate(
    dataset: Path, runs: tuple[Path, Path], url: str, cache: Path, depth: int, concurrency: int
) -> tuple[float, str]:
    command = [
        sys.executable, "-m", "engine.cli", "annotate", str(dataset), "--task", "relevance",
        "--runs", *map(str, runs), "--holes", "--depth", str(depth), "--output",
        str(cache.with_suffix(".jsonl")), "--cache", str(cache), "--annotator",
        "openai-compatible", "--base-url", url, "--model", "stand-in", "--concurrency",
        str(concurrency), "--no-progress",
    ]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, stderr=subprocess.PIPE, text=True, cwd=ROOT, check=True)
    return time.perf_counter() - started, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--delay", type=float, default=0.02)
    parser.add_argument("--concurrency", default="8,32")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        dataset, *runs = write_inputs(Path(folder), args.questions)
        server, url = start_server(args.delay)
        try:
            print(f"{args.questions} questions x 2 systems x depth {args.depth}, judge latency {args.delay * 1000:.0f} ms")
            for concurrency in map(int, args.concurrency.split(",")):
                cache = Path(folder) / f"cache-{concurrency}.sqlite"
                seconds, err = annotate(dataset, (runs[0], runs[1]), url, cache, args.depth, concurrency)
                plan = next(line for line in err.splitlines() if line.startswith("holes:"))
                pairs = int(plan.split(" to judge:")[0].rsplit("; ", 1)[-1])
                again, rerun = annotate(dataset, (runs[0], runs[1]), url, cache, args.depth, concurrency)
                free = "0 computed with 0 model calls" in rerun
                print(
                    f"concurrency {concurrency:>3}: {pairs} pairs in {seconds:.1f} s = "
                    f"{pairs / seconds:.0f} pairs/s (at most "
                    f"{concurrency / args.delay:.0f}/s at this latency); re-run {again:.1f} s, "
                    f"{'no' if free else 'SOME'} model calls"
                )
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()
