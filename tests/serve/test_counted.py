"""Searches and plans counted by outcome, and what an unexpected failure turns into for the client."""

from __future__ import annotations

import pytest

from a2x_local.errors import UserError
from a2x_local.serve.discovery import counted
from a2x_local.serve.errors import ModelCallFailed, TimedOut
from a2x_local.serve.metrics import Metrics


def outcomes(metrics: Metrics) -> dict[tuple[str, str], float]:
    return {(s.labels["method"], s.labels["outcome"]): s.value for family in metrics.searches.collect()
            for s in family.samples if s.name.endswith("_total")}


def test_each_outcome_is_counted_once_and_unexpected_errors_hide_their_traceback() -> None:
    metrics = Metrics(lambda: None, dict)
    with counted(metrics, "a2x", failure="the search failed", code="SearchFailed"):
        pass
    with pytest.raises(TimedOut), counted(metrics, "a2x", failure="the search failed", code="SearchFailed"):
        raise TimedOut("too slow")
    with pytest.raises(UserError), counted(metrics, "compose", failure="the plan failed", code="ComposeFailed"):
        raise UserError("refused")
    with pytest.raises(ModelCallFailed) as caught, \
            counted(metrics, "compose", failure="the plan failed", code="ComposeFailed"):
        raise KeyError("/srv/secret/path")
    assert caught.value.message == "the plan failed: KeyError" and caught.value.code == "ComposeFailed"
    assert "/srv/secret" not in caught.value.message and caught.value.status == 502
    assert outcomes(metrics) == {("a2x", "ok"): 1.0, ("a2x", "timeout"): 1.0, ("compose", "error"): 2.0}
