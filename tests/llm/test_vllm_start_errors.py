"""vLLM start-up failures explained by their cause: a machine with networking fully down (loopback included) is told
so, not sent to `models check` for a model that is fine."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2x_local.llm.config import EngineConfig
from a2x_local.llm.vllm_engine import VllmEngine

GLOO = ("[enforce fail at third_party/gloo/gloo/transport/tcp/device.cc:212] ifa != nullptr. Unable to find interface"
        " for: [127.0.0.1]")


def unstarted() -> VllmEngine:
    engine = VllmEngine.__new__(VllmEngine)       # the error helper needs only the settings, not a running engine
    engine.model_path, engine.model_label = Path("/models/tiny"), "tiny"
    engine.config = EngineConfig.defaults(max_model_len=2048)
    return engine


@pytest.mark.parametrize("message", [GLOO, "OSError: [Errno 101] Network is unreachable"])
def test_networking_down_is_named_with_its_cure(message):
    error = unstarted()._start_error(RuntimeError(message))
    assert "loopback" in error.message and "models check" not in (error.hint or "")
    assert "ip link set lo up" in error.hint and "--engine transformers" in error.hint


def test_a_model_problem_still_points_at_models_check():
    error = unstarted()._start_error(ValueError("No config.json in /models/tiny"))
    assert "models check" in error.hint
