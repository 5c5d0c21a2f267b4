"""Replica engines on a small local Ray cluster (the session's `local_ray`): a round shared over replicas comes back
in order, counted as one engine's, and failures are clear errors. Builds on replicas: tests/taxonomy."""

from __future__ import annotations

import pytest

from a2x_local.errors import UserError
from a2x_local.llm.config import RayConfig
from a2x_local.llm.replicas import ReplicaEngine
from a2x_local.llm.types import RegexConstraint, Request
from a2x_local.testing import ScriptedEngine

pytestmark = pytest.mark.distributed

CLUSTER = RayConfig.defaults(num_cpus=2, object_store_mb=128, cpus_per_replica=1, gpus_per_replica=0)


def test_replicas_share_a_round_and_keep_its_order(local_ray) -> None:
    def rule(request: Request) -> str:
        return str(request.context["i"] * 2)

    requests = [Request([{"role": "user", "content": f"n {i}"}], RegexConstraint(r"\d+"), label="t",
                        context={"i": i}) for i in range(50)]
    with ReplicaEngine(lambda: ScriptedEngine(rule), 2, ray_config=CLUSTER) as engine:
        results = engine.generate(requests)
        assert [r.value for r in results] == [str(2 * i) for i in range(50)]
        assert engine.usage.rounds == 1 and engine.usage.by_label["t"].calls == 50
        single = ScriptedEngine(rule)
        assert [r.prompt_tokens for r in single.generate(requests)] == [r.prompt_tokens for r in results]


def test_a_replica_that_cannot_start_is_a_clear_error(local_ray) -> None:
    def broken() -> ScriptedEngine:
        raise UserError("model 'x' is not usable", hint="run a2x-local models check x")

    with pytest.raises(UserError, match="not usable"):
        ReplicaEngine(broken, 2, ray_config=CLUSTER)


def test_the_openai_engine_is_not_replicated(settings) -> None:
    from a2x_local.llm import EngineOptions, make_engine

    with pytest.raises(UserError, match="'openai' engine"):
        make_engine(settings, EngineOptions.of(base_url="http://127.0.0.1:9/v1", replicas=2))
