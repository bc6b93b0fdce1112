"""The pytest plugin: a retrieval regression fails a test with a readable message."""

from __future__ import annotations

import json

import pytest

import engine
from engine.testing import assert_no_regression

pytest_plugins = ["pytester"]

SAMPLES = [{"id": f"q{i}", "input": i, "expected_output": [f"d{i}"]} for i in range(30)]


def _results(first_hit: int) -> engine.Results:
    """MRR of a system that ranks the relevant document first for the first
    ``first_hit`` queries and second for the rest."""
    run = {f"q{i}": [f"d{i}"] if i < first_hit else ["x", f"d{i}"] for i in range(30)}
    return (
        engine.Engine(config={})
        .dataset(samples=SAMPLES)
        .with_metrics(["retrieval-mrr"])
        .evaluate(run)
    )


def test_equal_systems_pass(tmp_path):
    baseline = tmp_path / "baseline.json"
    _results(30).to_json(baseline)
    assert_no_regression(_results(30), baseline)


def test_a_significant_drop_fails_with_the_numbers():
    """30 of 30 first -> 10 of 30 first: MRR 1 -> (10 + 20 / 2) / 30 = 2/3, 20 paired
    drops of 0.5, significant for the randomization test."""
    with pytest.raises(AssertionError) as failed:
        assert_no_regression(_results(10), _results(30))
    message = str(failed.value)
    assert message.startswith(
        "retrieval regressed (significant drop after Holm at alpha=0.05, "
        "or more failed samples than the baseline, or judged@k below the baseline's by more "
        "than 0.05)"
    )
    assert "retrieval-mrr: current fell from 1.0000 to 0.6667 vs baseline (n=30)" in message
    # the 20 unjudged "x" of 50 documents in the top 5: judged@5 0.6 against 1.0
    assert (
        "judged@5: current 0.600 (20 of 50 unjudged) vs baseline 1.000 (0 of 30 unjudged): "
        "0.400 lower > allowed 0.05" in message
    )


def test_max_drop_catches_a_small_drop():
    """29 -> 28 first: MRR drops by 0.5 / 30 = 0.0167, not significant, but > 0.01
    (judged@5 falls from 30/31 to 30/32 of the documents: 0.030, under 0.05)."""
    assert_no_regression(_results(28), _results(29))
    with pytest.raises(AssertionError, match=r"drop 0\.0167 > allowed 0\.01"):
        assert_no_regression(_results(28), _results(29), max_drop=0.01)


@pytest.mark.slow
def test_installed_plugin_in_a_users_suite(pytester):
    """In a user's project: the slotwise_engine fixture reads its slotwise.yaml, and a
    regression fails the test with the gate's message."""
    pytester.makefile(".jsonl", dataset="\n".join(map(json.dumps, SAMPLES)))
    pytester.makefile(
        ".yaml",
        slotwise="datasets:\n  mine:\n    path: dataset.jsonl\n    metrics: [retrieval-mrr]\n",
    )
    pytester.makepyfile(
        """
        from engine.testing import assert_no_regression

        def system(good):
            return lambda i: [f"d{i}"] if good or i % 2 else ["x", f"d{i}"]

        def test_no_regression(slotwise_engine):
            dataset = slotwise_engine.dataset("mine")
            before = dataset.run(system(True), progress=False)
            assert_no_regression(dataset.run(system(True), progress=False), before)
            assert_no_regression(dataset.run(system(False), progress=False), before)
        """
    )
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    outcome.assert_outcomes(failed=1)
    outcome.stdout.fnmatch_lines(
        [
            "*AssertionError: retrieval regressed*",
            "*retrieval-mrr: current fell from 1.0000 to 0.7500*",
        ]
    )


@pytest.mark.slow
def test_pytest_fixture_finds_the_config_upward(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slotwise_engine fixture finds the nearest slotwise.yaml from where pytest runs,
    as the CLI does, also above pytest's rootdir (here tests/, which has the ini file)."""
    monkeypatch.delenv("SLOTWISE_CONFIG", raising=False)
    pytester.makefile(".yaml", slotwise="metrics:\n  retrieval:\n    default_k: 7\n")
    tests = pytester.mkdir("tests")
    (tests / "pytest.ini").write_text("[pytest]\n")
    (tests / "test_k.py").write_text(
        "def test_k(slotwise_engine, pytestconfig):\n"
        "    assert pytestconfig.rootpath.name == 'tests'\n"
        "    assert slotwise_engine.config.default_k == 7\n"
        f"    assert slotwise_engine.config.origin == {str(pytester.path / 'slotwise.yaml')!r}\n"
    )
    monkeypatch.chdir(tests)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "test_k.py")
    outcome.assert_outcomes(passed=1)
