"""Issue 60, round three: shards that change between listing and reading, symbolic link
cycles in a shard directory, integer options out of range, and the user's text (ids,
metadata values) printed as written, each an exit 2 that names its culprit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.errors import InputError, Problem
from engine.io import sharded, shards


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine.cli", *argv]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def _run_shards(folder: Path, parts: int = 3, queries: int = 20) -> Path:
    folder.mkdir()
    for part in range(parts):
        lines = [f"q{part}-{i} Q0 d{i} 1 1.0 tag\n" for i in range(queries)]
        (folder / f"part-{part}.trec").write_text("".join(lines))
    return folder


class TestShardChanged:
    def test_truncated_at_a_line_between_listing_and_reading(self, tmp_path: Path) -> None:
        """A shard cut short at a line boundary after it was listed is refused, naming
        it, rather than read as fewer queries (missing outputs scored 0)."""
        folder = _run_shards(tmp_path / "run")
        listed = sharded.Long.of(folder, "run", trec=True)
        shard = folder / "part-1.trec"
        text = shard.read_text()
        shard.write_text(text[: text.index("\n", len(text) // 2) + 1])
        with pytest.raises(InputError, match=r"part-1\.trec: the file changed since it was listed"):
            sharded.read(listed)
        with pytest.raises(InputError, match=r"part-1\.trec: the file changed"):
            list(sharded.stream(listed))

    def test_unchanged_shards_read(self, tmp_path: Path) -> None:
        folder = _run_shards(tmp_path / "run")
        assert len(sharded.read(sharded.Long.of(folder, "run", trec=True))) == 60


class TestShardWalk:
    def test_symlink_cycle_is_exit_2_naming_the_link(self, tmp_path: Path) -> None:
        """``ln -s .. loop`` in a shard directory: a quick exit 2 naming the link, not a
        walk that reads each file 40 times (or hangs)."""
        folder = _run_shards(tmp_path / "run")
        (folder / "loop").symlink_to("..")
        (tmp_path / "q.qrels").write_text("q0-1 0 d1 1\n")
        done = _cli("run", "--qrels", "q.qrels", "--run", "run", "--metrics", "retrieval-map",
                    cwd=tmp_path)  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert f"{folder / 'loop'}: following this symbolic link reaches" in done.stderr
        assert "(a cycle)" in done.stderr and "Traceback" not in done.stderr

    def test_each_file_read_once(self, tmp_path: Path) -> None:
        """A second link into a directory, or a link to a file also listed, is refused:
        its lines would count twice."""
        folder = _run_shards(tmp_path / "run")
        (folder / "sub").mkdir()
        (folder / "sub" / "x.trec").write_text("x Q0 d 1 1 t\n")
        (folder / "again").symlink_to("sub")
        with pytest.raises(InputError, match=r"again: following .* read twice"):
            shards.resolve(folder)
        (folder / "again").unlink()
        (folder / "same.trec").symlink_to("part-0.trec")
        with pytest.raises(InputError, match=r"same\.trec: the same file as .*part-0\.trec"):
            shards.resolve(folder)
        with pytest.raises(InputError, match="the same file"):
            shards.resolve([folder / "part-0.trec", folder / "part-0.trec"])


DATASET = {
    "name": "odd",
    "samples": [
        {"id": "q-\x1b[31mred", "expected_output": ["d1"], "metadata": {"topic": "a[/]b"}},
        {"id": "[bold]q-2", "expected_output": ["d2"], "metadata": {"topic": "c:smile:"}},
    ],
}
OUTPUTS = {"q-\x1b[31mred": ["d3", "d1"], "[bold]q-2": ["d2"]}


@pytest.fixture
def odd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "data.json").write_text(json.dumps(DATASET))
    (tmp_path / "outputs.json").write_text(json.dumps(OUTPUTS))
    monkeypatch.chdir(tmp_path)
    return tmp_path


class TestNamesAsWritten:
    def test_by_value_with_markup_printed_as_written(self, odd: Path, capsys) -> None:
        """A ``--by`` value ``a[/]b`` is a cell's text, not Rich markup (it crashed)."""
        argv = ["run", "data.json", "--outputs", "outputs.json", "--metrics", "retrieval-mrr"]
        assert main([*argv, "--by", "topic"]) == 0
        out = capsys.readouterr().out
        assert "a[/]b (1)" in out and "c:smile: (1)" in out

    def test_explain_shows_control_characters_escaped(self, odd: Path, capsys) -> None:
        """An id holding ``ESC[31m`` is shown as ``\\x1b[31m`` by explain, never sent to
        the terminal; its JSON keeps the id as it is."""
        argv = ["run", "data.json", "--outputs", "outputs.json", "--metrics", "retrieval-mrr"]
        assert main([*argv, "--format", "json", "--output", "r.json", "--keep-outputs"]) == 0
        capsys.readouterr()
        explain = ["explain", "r.json", "--dataset", "data.json"]
        assert main([*explain, "--worst", "2", "--metric", "retrieval-mrr"]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out
        assert "q-\\x1b[31mred: " in out and "[bold]q-2" in out
        assert main([*explain, "--sample", "q-\x1b[31mred", "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out)[0]["sample_id"] == "q-\x1b[31mred"


class TestOptions:
    @pytest.mark.parametrize("k", ["99999999999999999999", "5,99999999999999999999", "0"])
    def test_k_out_of_range_is_a_usage_error(self, odd: Path, capsys, k: str) -> None:
        argv = ["run", "data.json", "--outputs", "outputs.json", "--metrics", "retrieval-mrr"]
        assert main([*argv, "--k", k]) == 2
        assert "--k: must be a positive integer up to 2147483647" in capsys.readouterr().err

    @pytest.mark.parametrize(
        "argv",
        [
            ["compare", "a.json", "b.json", "--seed", "99999999999999999999"],
            ["compare", "a.json", "b.json", "--seed", "-1"],
            ["compare", "a.json", "b.json", "--resamples", "99999999999999999999"],
            ["compare", "a.json", "b.json", "--movers", "-1"],
        ],
    )
    def test_every_integer_option_bounded(self, odd: Path, capsys, argv: list[str]) -> None:
        assert main(argv) == 2
        assert f"{argv[-2]}: must be" in capsys.readouterr().err

    def test_metric_k_beyond_int64(self, odd: Path, capsys) -> None:
        spec = "retrieval-ndcg-at-k@99999999999999999999"
        assert main(["run", "data.json", "--outputs", "outputs.json", "--metrics", spec]) == 2
        assert "k must be below 2**63" in capsys.readouterr().err


class TestProblemNames:
    def test_malformed_line_names_file_line_and_query(self, tmp_path: Path) -> None:
        """A malformed TREC line's problem names the file, the line and its query."""
        (tmp_path / "q.qrels").write_text("q1 0 d1 1\nq2 0 d2 high\n")
        (tmp_path / "r.run").write_text("q1 Q0 d1 1 1.0 t\nq7 Q0 d2 2\n")
        qrels = _cli("validate", "q.qrels", cwd=tmp_path)
        assert qrels.returncode == 2
        assert "q.qrels:2 sample 'q2': relevance 'high' is not a finite number" in qrels.stderr
        run = _cli("validate", "r.run", cwd=tmp_path)
        assert run.returncode == 2
        assert "r.run:2 sample 'q7': expected 6 fields" in run.stderr

    def test_a_line_not_utf8_is_named(self, tmp_path: Path) -> None:
        (tmp_path / "r.run").write_bytes(b"q1 Q0 d1 1 1.0 t\nq2 Q0 d\xff 2 0.5 t\n")
        done = _cli("validate", "r.run", cwd=tmp_path)
        assert done.returncode == 2 and "r.run:2: not UTF-8 text" in done.stderr

    def test_no_stray_slash_without_a_pointer(self) -> None:
        assert str(Problem("no qrels line", source="e.qrels")) == "e.qrels: no qrels line"
        assert str(Problem("an empty list of files")) == "an empty list of files"
        assert str(Problem("bad", pointer="/a/0")) == "/a/0: bad"
        assert " /" not in str(InputError([Problem("x", source="f", line=3)]))


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_walk_is_quick_on_a_wide_cycle(tmp_path: Path) -> None:
    """Several links up the tree at several levels: refused, not walked exponentially."""
    folder = _run_shards(tmp_path / "run")
    for level in ("a", "a/b", "a/b/c"):
        (folder / level).mkdir()
        for name in ("l1", "l2", "l3"):
            (folder / level / name).symlink_to(folder)
    with pytest.raises(InputError, match="a cycle"):
        shards.resolve(folder)


def test_a_document_shard_changed_after_listing(tmp_path: Path, monkeypatch) -> None:
    """A JSONL dataset shard cut short after it was listed is refused, naming it, rather
    than read as fewer samples (the listing is handed back as it was, then the file cut)."""
    from engine.io import sources

    folder = tmp_path / "data"
    folder.mkdir()
    for part in range(2):
        lines = [
            json.dumps({"id": f"q{part}-{i}", "expected_output": [f"d{i}"]}) + "\n"
            for i in range(10)
        ]
        (folder / f"part-{part}.jsonl").write_text("".join(lines))
    assert len(sources.read_dataset(folder)[1]) == 20
    listed = shards.resolve(folder)
    shard = folder / "part-1.jsonl"
    shard.write_text("".join(shard.read_text().splitlines(keepends=True)[:4]))
    monkeypatch.setattr(sources.shards, "resolve", lambda spec: listed)
    with pytest.raises(InputError, match=r"part-1\.jsonl: the file changed since it was listed"):
        sources.read_dataset(folder)
