"""Time the transformers annotator (`slotwise annotate --task utility`) on a device.

    python benchmarks/annotate.py --device cuda [--device cpu] [--sizes 32x2,768x12] [--repeat 4]

Nothing is downloaded: each size is a random Llama built locally by ``tests/tiny_lm.py``
(``WIDTHxLAYERS``), so the numbers measure the annotator's own cost (prompting, batching,
padding, one forward pass per batch, the softmax) at that model size, not a real model's
quality. The items are the quickstart's top-5 passages of the hybrid system (46 questions
x 5), repeated ``--repeat`` times with a suffix so that none is cached. For every size,
the p(NO-RESPONSE) values of each device are compared with the first device's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart"
sys.path.insert(0, str(ROOT / "tests"))


def write_inputs(folder: Path, repeat: int) -> tuple[Path, Path, int]:
    """The quickstart questions ``repeat`` times (ids suffixed) and their top-5 outputs."""
    dataset = yaml.safe_load((QUICKSTART / "dataset.yaml").read_text())
    outputs = json.loads((QUICKSTART / "outputs" / "hybrid-rerank.json").read_text())
    samples, runs = [], {}
    for copy in range(repeat):
        for sample in dataset["samples"]:
            sid = f"{sample['id']}#{copy}"
            samples.append(
                {
                    **sample,
                    "id": sid,
                    "input": {"question": f"{sample['input']['question']} ({copy})"},
                }
            )
            runs[sid] = {"retrieved": outputs[sample["id"]]["retrieved"][:5]}
    (folder / "dataset.json").write_text(json.dumps({"name": "annotate-bench", "samples": samples}))
    (folder / "outputs.json").write_text(json.dumps(runs))
    return folder / "dataset.json", folder / "outputs.json", 5 * len(samples)


def annotate(
    model: Path, device: str, dataset: Path, outputs: Path, out: Path, batch: int
) -> float:
    """Seconds for one `slotwise annotate` run (model load included)."""
    command = [
        sys.executable, "-m", "engine.cli", "annotate", str(dataset), "--outputs", str(outputs),
        "--output", str(out), "--annotator", "transformers", "--model", str(model),
        "--device", device, "--task", "utility", "--k", "5", "--batch-size", str(batch),
        "--no-progress",
    ]  # fmt: skip
    start = time.perf_counter()
    subprocess.run(command, check=True, cwd=ROOT)
    return time.perf_counter() - start


def utilities(path: Path) -> dict[tuple[str, str], float]:
    document = json.loads(path.read_text())
    return {
        (sample["id"], doc): label["p_no_response"]
        for sample in document["samples"]
        for doc, label in sample["expected_output"]["utility"].items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--device", action="append", default=None)
    parser.add_argument("--sizes", default="32x2,768x12")
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()
    devices = args.device or ["cpu"]

    from tiny_lm import make_tiny_lm

    print(
        "| model (width x layers) | device | items | seconds | items/s | max abs diff vs first device |"
    )
    print("|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        dataset, outputs, items = write_inputs(root, args.repeat)
        for size in args.sizes.split(","):
            width, layers = (int(x) for x in size.split("x"))
            model = make_tiny_lm(root / f"lm-{size}", hidden_size=width, layers=layers)
            first: dict[tuple[str, str], float] | None = None
            for device in devices:
                out = root / f"out-{size}-{device.replace(':', '')}.json"
                seconds = annotate(model, device, dataset, outputs, out, args.batch_size)
                values = utilities(out)
                first = first or values
                diff = max(abs(values[key] - first[key]) for key in first)
                print(
                    f"| {size} | {device} | {items} | {seconds:.1f} | {items / seconds:,.0f} | {diff:.2e} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
