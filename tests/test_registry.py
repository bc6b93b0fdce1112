"""The metric registry: discovery without import, lazy loading, conflicts, broken plugins."""

from __future__ import annotations

import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import ClassVar

import attrs
import numpy as np
import pytest

import engine
from engine.evaluation.registry import GROUP, Registry


def _module(tmp_path: Path, name: str, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)


def _broken_and_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Registry:
    """A registry of two plugins: ``broken`` fails to import, ``ones`` works."""
    _module(tmp_path, "plug_broken", "raise ImportError('needs torch')\n", monkeypatch)
    _module(tmp_path, "plug_ok", GOOD, monkeypatch)
    return Registry(
        entry_points=lambda: [
            EntryPoint("broken", "plug_broken:Metric", GROUP),
            EntryPoint("ones", "plug_ok:Ones", GROUP),
        ]
    )


GOOD = """
    from typing import ClassVar
    import attrs, numpy as np
    from engine import MetricBase

    @attrs.frozen
    class Ones(MetricBase):
        '''Always 1.'''
        alias: ClassVar[str] = "ones"
        def score(self, batch):
            return np.ones(len(batch))
"""


@attrs.frozen
class Constant(engine.MetricBase):
    """A constant metric for in-process registration."""

    alias: ClassVar[str] = "constant-test"
    value: float = 0.25

    def score(self, batch: engine.Batch) -> np.ndarray:
        return np.full(len(batch), self.value)


class TestDiscovery:
    def test_lists_aliases_without_importing(self, tmp_path, monkeypatch):
        """Listing aliases never imports the plugin modules."""
        _module(tmp_path, "plug_lazy", GOOD, monkeypatch)
        registry = Registry(entry_points=lambda: [EntryPoint("ones", "plug_lazy:Ones", GROUP)])
        assert registry.aliases() == ["ones"]
        assert "plug_lazy" not in sys.modules
        assert registry.get("ones").alias == "ones"
        assert "plug_lazy" in sys.modules

    def test_installed_builtins_are_found(self):
        """The built-in metrics arrive through the same entry-point group."""
        aliases = Registry().aliases()
        for alias in (
            "retrieval-hit-at-k",
            "retrieval-recall-at-k",
            "retrieval-mrr",
            "retrieval-ndcg-at-k",
            "answer-containment-at-k",
        ):
            assert alias in aliases
        assert Registry().provenance("retrieval-mrr")[0] == "slotwise"

    def test_identical_entry_points_are_one_candidate(self):
        """The same entry point seen twice (e.g. two path entries) is not a conflict."""
        ep = EntryPoint("retrieval-mrr", "metrics_plugins.retrieval:MRR", GROUP)
        registry = Registry(entry_points=lambda: [ep, ep])
        assert registry.get("retrieval-mrr").alias == "retrieval-mrr"


class TestErrors:
    def test_unknown_alias_suggests(self):
        """An unknown alias names close matches and points to where every installed
        metric is listed (not all their names: 61 of them)."""
        registry = Registry(
            entry_points=lambda: [
                EntryPoint("retrieval-mrr", "metrics_plugins.retrieval:MRR", GROUP)
            ]
        )
        with pytest.raises(engine.UnknownMetricError) as info:
            registry.get("retrieval-mmr")
        message = str(info.value)
        assert "Did you mean: retrieval-mrr?" in message
        assert message == (
            "Unknown metric 'retrieval-mmr'. Did you mean: retrieval-mrr? `slotwise metrics` "
            "lists the installed metrics (engine.metrics() in Python)."
        )
        assert info.value.available == ("retrieval-mrr",)
        assert isinstance(info.value, LookupError)

    def test_duplicate_alias_names_both(self):
        """Two plugins claiming one alias is an error naming both targets."""
        eps = [
            EntryPoint("retrieval-mrr", "metrics_plugins.retrieval:MRR", GROUP),
            EntryPoint("retrieval-mrr", "other_dist.metrics:MRR", GROUP),
        ]
        with pytest.raises(engine.DuplicateMetricError) as info:
            Registry(entry_points=lambda: eps).get("retrieval-mrr")
        assert "metrics_plugins.retrieval:MRR" in str(info.value)
        assert "other_dist.metrics:MRR" in str(info.value)

    def test_import_failure_is_isolated(self, tmp_path, monkeypatch):
        """A plugin that fails to import raises only when asked for; others keep working."""
        registry = _broken_and_ok(tmp_path, monkeypatch)
        assert registry.get("ones").alias == "ones"
        with pytest.raises(engine.MetricLoadError) as info:
            registry.get("broken")
        assert "needs torch" in str(info.value)
        assert isinstance(info.value.__cause__, ImportError)
        infos = {i.alias: i for i in registry.describe()}
        assert infos["broken"].error and "needs torch" in infos["broken"].error
        assert infos["ones"].error is None and infos["ones"].description == "Always 1."

    def test_preload_is_quiet_and_get_reports_once(self, tmp_path, monkeypatch, caplog):
        """preload (what a command runs on a thread while it reads its files) imports
        the plugins of the aliases it is given and says nothing of one that fails or is
        unknown; get() then raises for the broken one and logs it once, as without it."""
        registry = _broken_and_ok(tmp_path, monkeypatch)
        with caplog.at_level("WARNING", logger="slotwise"):
            registry.preload(["broken", "ones", "no-such-metric"])
            assert caplog.records == []
            assert "plug_ok" in sys.modules and "plug_broken" not in sys.modules
            with pytest.raises(engine.MetricLoadError, match="needs torch"):
                registry.get("broken")
        assert [r.event for r in caplog.records] == ["plugin.load_failed"]
        assert registry.get("ones").alias == "ones"

    @pytest.mark.parametrize(
        ("source", "reason"),
        [
            ("class Metric:\n    alias = 'bad'\n", "not an attrs class"),
            (
                "import attrs\n@attrs.frozen\nclass Metric:\n    alias = 'bad'\n    requires = frozenset()\n    higher_is_better = True\n",
                "score",
            ),
            (
                "import attrs\n@attrs.frozen\nclass Metric:\n    alias = 'bad'\n    requires = frozenset({'magic'})\n    higher_is_better = True\n    def score(self, b): ...\n    def aggregate(self, v): ...\n",
                "requires",
            ),
            ("Metric = 42\n", "not a class"),
        ],
    )
    def test_protocol_is_checked_on_load(self, tmp_path, monkeypatch, source, reason):
        """A loaded object that is not a valid metric class is a load error with the reason."""
        _module(tmp_path, "plug_invalid", source, monkeypatch)
        registry = Registry(entry_points=lambda: [EntryPoint("bad", "plug_invalid:Metric", GROUP)])
        with pytest.raises(engine.MetricLoadError, match=reason):
            registry.get("bad")

    def test_alias_must_match_entry_point(self, tmp_path, monkeypatch):
        """The class's alias and its entry point name must agree."""
        _module(tmp_path, "plug_named", GOOD, monkeypatch)
        registry = Registry(entry_points=lambda: [EntryPoint("twos", "plug_named:Ones", GROUP)])
        with pytest.raises(engine.MetricLoadError, match="differs from its entry point name"):
            registry.get("twos")


class TestInProcess:
    def test_register_and_use(self, eng):
        """register_metric makes a class usable by alias, with parameters."""
        eng.register_metric(Constant)
        assert "constant-test" in eng.registry.aliases()
        results = (
            eng.dataset(samples=[{"id": "a", "expected_output": ["d"]}])
            .with_metrics(["constant-test(value=0.5)"])
            .evaluate({"a": ["d"]})
        )
        assert results.summary()["constant-test(value=0.5)"]["mean"] == 0.5
        assert results.metrics[0].distribution == "<in-process>"

    def test_register_rejects_installed_alias(self, eng):
        """An in-process metric cannot shadow an installed alias."""

        @attrs.frozen
        class Shadow(Constant):
            alias: ClassVar[str] = "retrieval-mrr"

        with pytest.raises(engine.DuplicateMetricError):
            eng.register_metric(Shadow)

    def test_register_rejects_non_metrics(self, eng):
        """register_metric checks the protocol too."""
        with pytest.raises(engine.MetricLoadError):
            eng.register_metric(dict)

    def test_module_level_functions_use_one_default_engine(self):
        """engine.metrics() lists the built-ins through the default engine."""
        assert engine.default_engine() is engine.default_engine()
        assert "retrieval-mrr" in {i.alias for i in engine.metrics()}
        assert engine.metric("retrieval-mrr@10").k == 10
