"""The pytest plugin: a retrieval regression fails a test with a readable message."""

from __future__ import annotations

import json

import pytest

import engine
from engine.testing import Inconclusive, assert_no_regression

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


def test_equal_systems_hold(tmp_path):
    """30 equal pairs: every difference 0, the interval [0, 0] lies above -0.01: held."""
    baseline = tmp_path / "baseline.json"
    _results(30).to_json(baseline)
    verdict = assert_no_regression(_results(30), baseline)
    assert verdict.outcome == "held"
    assert verdict.verdicts[0].interval == (0.0, 0.0)


def test_a_significant_drop_fails_with_the_numbers():
    """30 of 30 first -> 10 of 30 first: MRR 1 -> (10 + 20 / 2) / 30 = 2/3, 20 paired
    drops of 0.5, significant for the randomization test: regressed. The 20 unjudged "x"
    of 50 documents in the top 5 (judged@5 0.6 against 1.0) make the labels can't tell
    beside it; regressed is the worse of the two."""
    with pytest.raises(AssertionError) as failed:
        assert_no_regression(_results(10), _results(30))
    assert not isinstance(failed.value, Inconclusive)
    message = str(failed.value)
    assert message.startswith("verdict: REGRESSED (current against baseline; 1 regressed")
    assert "retrieval-mrr: REGRESSED -0.3333 [" in message
    assert "significantly worse: p (Holm) = <0.0001 < 0.05" in message
    assert "current: judged@5 0.600 (20 of 50 unjudged) < 0.9" in message
    assert (
        "judged@5: current 0.600 (20 of 50 unjudged) against baseline 1.000 (0 of 30 "
        "unjudged), 0.400 apart > 0.05" in message
    )


def test_a_small_drop_is_cant_tell_then_held_within_a_wider_margin():
    """29 -> 28 first: one pair drops by 0.5, MRR by 0.5 / 30 = 0.0167. One pair that
    differs cannot be significant (smallest p 2 / 2 = 1), and the bootstrap interval of
    the mean reaches -0.0333 or lower (a resample holding the drop twice or more, p > 0.25):
    below the retrieval margin 0.01, so can't tell; with max_drop 0.5 (every resample's
    mean is at least -0.5) it held. judged@5: 30/31 and 30/32, both >= 0.9."""
    with pytest.raises(Inconclusive, match=r"only 1 of the 30 pairs differ") as failed:
        assert_no_regression(_results(28), _results(29))
    assert "reaches below -0.01" in str(failed.value)
    verdict = assert_no_regression(_results(28), _results(29), allow_inconclusive=True)
    assert verdict.outcome == "can't tell"
    assert verdict.verdicts[0].interval[0] <= -1 / 30
    assert assert_no_regression(_results(28), _results(29), max_drop=0.5).outcome == "held"


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
            "*AssertionError: verdict: REGRESSED*",
            "*retrieval-mrr: REGRESSED -0.2500*",
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
