"""The documented loop of docs/label-free.md ("People in the loop"), run as written: every
``$ slotwise ...`` line of the section's console blocks, in order, in a copy of
examples/quickstart, against the stand-in judge server over HTTP; each output line the
doc shows must be printed, and each ``echo $?`` must show the exit code. Where the doc
hands the tasks to people, a simulated panel of annotators grades them (the stand-in's
word rule with seeded noise) and writes Label Studio's JSON export."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_docs_snippets import console_steps

from engine.annotate.stand_in import umbrela_grade
from engine.cli import main
from engine.io.label_exchange import SCALES

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "label-free.md"
SECTION = "## People in the loop: from questions to a verdict"
DOC_URL = "http://127.0.0.1:8765/v1"
ANNOTATORS = ("ana@fernway.example", "ben@fernway.example", "chen@fernway.example")


def _section() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end >= 0 else len(text)]


def grade(annotator: str, question: str, passage: str) -> int:
    """One simulated annotator's grade: the stand-in's UMBRELA rule, moved one grade up
    or down (within 0-3) for about 15% of the pairs each, by a hash of the annotator and
    the pair (the same every run)."""
    rule = umbrela_grade(question, passage)
    draw = (
        int(hashlib.sha256(f"{annotator}|{question}|{passage}".encode()).hexdigest()[:8], 16) % 100
    )
    shift = -1 if draw < 15 else 1 if draw >= 85 else 0
    return min(3, max(0, rule + shift))


def simulated_panel(tasks: Path, export: Path) -> None:
    """Label Studio's JSON export of ``tasks`` (its import JSON) after three annotators
    graded every task: each annotation's result is the ``grade`` choice."""
    scale = SCALES["umbrela"]
    exported = []
    for number, task in enumerate(json.loads(tasks.read_text()), start=1):
        data = task["data"]
        annotations = [
            {
                "id": number * 10 + i,
                "completed_by": {"id": i + 1, "email": who},
                "was_cancelled": False,
                "result": [
                    {
                        "id": f"r{number}-{i}",
                        "from_name": "grade",
                        "to_name": "passage",
                        "type": "choices",
                        "origin": "manual",
                        "value": {
                            "choices": [scale.choice(grade(who, data["question"], data["passage"]))]
                        },
                    }
                ],
            }
            for i, who in enumerate(ANNOTATORS)
        ]
        exported.append({"id": number, "data": data, "annotations": annotations, "predictions": []})
    export.write_text(json.dumps(exported))


def test_the_documented_loop(
    server_factory: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = server_factory()
    folder = tmp_path / "examples" / "quickstart"
    shutil.copytree(ROOT / "examples" / "quickstart", folder)
    (tmp_path / "out").mkdir()
    monkeypatch.chdir(folder)
    steps = console_steps(_section())
    ran: dict[str, tuple[int, str]] = {}  # command -> its exit code and output
    code: int | None = None
    for number, (command, shown) in enumerate(steps):
        words = shlex.split(command.replace(DOC_URL, server.url))
        if words[:2] == ["cd", "examples/quickstart"] or words[:3] == [
            "python",
            "-m",
            "engine.annotate.stand_in",
        ]:
            continue
        if words == ["echo", "$?"]:
            assert shown == [str(code)], f"after {list(ran)[-1]!r}"
            continue
        assert words[0] == "slotwise", command
        capsys.readouterr()
        code = main(words[1:])
        out = capsys.readouterr()
        printed = set((out.out + out.err).splitlines())
        missing = [
            line for line in shown if line.strip() not in ("...", "") and line not in printed
        ]
        assert not missing, f"{command}\nnot printed: {missing}\nprinted:\n{out.out}{out.err}"
        if words[1:3] == ["labels", "export"] and "label-studio" in words:
            handout = Path(words[words.index("--output") + 1])
            simulated_panel(handout, handout.with_name("project-1-export.json"))
        ran[command] = (code, out.out + out.err)
        following = steps[number + 1][0] if number + 1 < len(steps) else ""
        if following != "echo $?":
            assert code == 0, f"{command} exited {code}\n{out.err}"
    # the people's labels are the median of the panel's three grades, each pair's
    # computed here from the handout; their provenance names the design by its hash
    tasks = [t["data"] for t in json.loads((tmp_path / "out" / "tasks.json").read_text())]
    panel = {
        (t["query_id"], t["doc_id"]): statistics.median(
            grade(w, t["question"], t["passage"]) for w in ANNOTATORS
        )
        for t in tasks
    }
    human = yaml.safe_load((tmp_path / "out" / "human.yaml").read_text())["samples"]
    assert {
        (s["id"], d): g for s in human for d, g in s["expected_output"]["relevance"].items()
    } == panel
    design = hashlib.sha256((tmp_path / "out" / "SAMPLE.design.json").read_bytes()).hexdigest()
    assert {s["metadata"]["sample"]["design_sha256"] for s in human} == {design}
    # without --design, compare weighs by the design the labels' provenance records
    ((gate, (status, result)),) = [(c, r) for c, r in ran.items() if c.split()[1] == "compare"]
    words = shlex.split(gate)
    at = words.index("--design")
    capsys.readouterr()
    assert main(words[1:at] + words[at + 2 :]) == status
    assert "".join(capsys.readouterr()) == result
    kinds = [shlex.split(c)[1] for c in ran]
    for needed in ("annotate", "sample", "labels", "compare"):
        assert needed in kinds, f"the loop has no `slotwise {needed}`"
