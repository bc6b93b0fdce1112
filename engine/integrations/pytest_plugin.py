"""The slotwise pytest plugin (entry point ``pytest11``), active wherever slotwise is
installed: the ``slotwise_engine`` fixture, and :func:`~engine.testing.assert_no_regression`
to fail a test when retrieval quality regressed, with the gate of ``slotwise compare
--fail-on-regression``::

    from engine.testing import assert_no_regression

    def test_retrieval_did_not_regress(slotwise_engine):
        evaluation = slotwise_engine.dataset("quickstart").with_metrics(["retrieval-ndcg-at-k@10"])
        assert_no_regression(evaluation.run(my_retriever), "baselines/ndcg.json", max_drop=0.01)

Nothing is imported until a fixture is used, so the plugin costs other test suites nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from engine.evaluation.api import Engine


@pytest.fixture
def slotwise_engine(request: pytest.FixtureRequest) -> Engine:
    """An engine configured as the ``slotwise`` CLI would be, run where pytest was started:
    by the file ``SLOTWISE_CONFIG`` names, else the nearest ``slotwise.yaml`` from that
    folder upward (the defaults when there is none). Results record which file it was."""
    from engine.evaluation.api import Engine
    from engine.io.config import Config

    return Engine(config=Config.discover(request.config.invocation_params.dir))
