"""The openai engine against a scripted server: httpx.MockTransport answers, nothing is contacted, no model runs.

Every test gets a ``FakeServer`` that records what the engine sent and answers like vLLM's OpenAI-compatible
server (the /v1/models list with ``max_model_len``, chat completions with usage, ``{"error": {"message": ...}}``).
Retried answers carry ``retry-after-ms: 1`` so the openai client's backoff stays in milliseconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from a2x_local.errors import UserError
from a2x_local.llm import JsonConstraint, RegexConstraint, Request
from a2x_local.llm.config import OpenAIConfig
from a2x_local.llm.openai_engine import OpenAIEngine
from a2x_local.llm.types import ChoiceConstraint
from tests.llm.engine_cases import OPTIONS, POSITIONS, Pick

BASE_URL = "http://gpu-box.lan:8000"
API = f"{BASE_URL}/v1"
FAST_RETRY = {"retry-after-ms": "1"}

Answer = Callable[[dict[str, Any], httpx.Request], httpx.Response]


def model_entry(name: str, max_model_len: int | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"id": name, "object": "model", "created": 0, "owned_by": "vllm", "root": name}
    if max_model_len is not None:
        entry["max_model_len"] = max_model_len
    return entry


def completion(text: str, finish: str = "stop", prompt: int = 11, generated: int = 3,
               cached: int | None = None) -> httpx.Response:
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": generated,
                             "total_tokens": prompt + generated}
    if cached is not None:      # a server with a prefix cache says how much of the prompt it served
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return httpx.Response(200, json={
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "served",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
        "usage": usage})


def server_error(status: int, message: str) -> httpx.Response:
    """vLLM's error body; retry-after-ms keeps the client's backoff short."""
    return httpx.Response(status, headers=FAST_RETRY, json={
        "error": {"message": message, "type": "ServerError", "param": None, "code": status}})


class FakeServer:
    """Records every request and answers /v1/models from ``models`` and chat completions with ``answer``."""

    def __init__(self, answer: Answer | None = None, models: list[dict[str, Any]] | None = None,
                 list_models: Callable[[httpx.Request], httpx.Response] | None = None) -> None:
        self.answer = answer or (lambda body, request: completion(OPTIONS[0]))
        self.models = [model_entry("served", 4096)] if models is None else models
        self.list_models = list_models or (lambda request: httpx.Response(200, json={"object": "list",
                                                                                    "data": self.models}))
        self.requests: list[httpx.Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx.Request) -> httpx.Response:
        with self._lock:
            self.requests.append(request)
        if request.method == "GET" and request.url.path == "/v1/models":
            return self.list_models(request)
        assert request.method == "POST" and request.url.path == "/v1/chat/completions", request.url
        return self.answer(json.loads(request.content), request)

    def paths(self) -> list[str]:
        return [request.url.path for request in self.requests]

    def chats(self) -> list[httpx.Request]:
        return [request for request in self.requests if request.url.path == "/v1/chat/completions"]

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(request.content) for request in self.chats()]


def make_engine(server: FakeServer, *, model: str = "served", concurrency: int = 4, max_retries: int = 0,
                timeout_s: float = 0.25, **kwargs: Any) -> OpenAIEngine:
    config = OpenAIConfig.defaults(base_url=BASE_URL, concurrency=concurrency, timeout_s=timeout_s,
                                   max_retries=max_retries)
    return OpenAIEngine(config, model=model, transport=httpx.MockTransport(server), **kwargs)


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def engine(server: FakeServer) -> Iterator[OpenAIEngine]:
    with make_engine(server) as engine:
        yield engine


def ask(i: int, constraint: Any = None, *, max_tokens: int = 8, label: str = "mock", seed: int | None = None,
        temperature: float = 0.0) -> Request:
    return Request([{"role": "user", "content": f"question {i}"}], constraint or ChoiceConstraint(OPTIONS),
                   max_tokens=max_tokens, label=label, seed=seed, temperature=temperature)


def question(body: dict[str, Any]) -> int:
    return int(body["messages"][-1]["content"].split()[-1])


# Discovery


def test_the_single_served_model_is_found_once_with_its_context_window() -> None:
    server = FakeServer(models=[model_entry("Qwen/Qwen2.5-7B-Instruct", 4096)])
    engine = make_engine(server, model="", max_model_len=1024)
    assert server.requests == []
    results = engine.generate([ask(0), ask(1)])
    assert all(result.ok for result in results)
    assert engine.served_model() == "Qwen/Qwen2.5-7B-Instruct" and engine.max_model_len == 4096
    engine.generate([ask(2)])
    assert engine.describe()["model"] == "Qwen/Qwen2.5-7B-Instruct" and engine.describe()["max_model_len"] == 4096
    assert server.paths().count("/v1/models") == 1 and server.paths()[0] == "/v1/models"
    assert {body["model"] for body in server.bodies()} == {"Qwen/Qwen2.5-7B-Instruct"}


@pytest.mark.parametrize(("served", "candidates"), [
    ("qwen-7b", ["qwen-7b"]),
    ("Qwen/Qwen2.5-7B-Instruct", ["qwen-7b", "Qwen2.5-7B-Instruct"]),
    ("/models/Qwen2.5-7B-Instruct", ["qwen-7b", "/data/models/Qwen2.5-7B-Instruct", "Qwen2.5-7B-Instruct"]),
], ids=["alias", "folder-of-repository", "path"])
def test_among_several_models_the_one_matching_a_candidate_is_chosen(served: str, candidates: list[str]) -> None:
    server = FakeServer(models=[model_entry("meta-llama/Llama-3.1-8B-Instruct", 8192), model_entry(served, 2048),
                                model_entry("Qwen/Qwen2.5-0.5B-Instruct", 1024)])
    engine = make_engine(server, model="", candidates=candidates)
    [result] = engine.generate([ask(0)])
    assert result.ok and server.bodies()[0]["model"] == served
    assert engine.served_model() == served and engine.max_model_len == 2048
    assert server.paths().count("/v1/models") == 1


def test_several_models_and_no_match_is_a_user_error_naming_them() -> None:
    server = FakeServer(models=[model_entry("meta-llama/Llama-3.1-8B-Instruct"), model_entry("mistral-7b")])
    engine = make_engine(server, model="", candidates=["qwen-7b", "Qwen/Qwen2.5-7B-Instruct"])
    with pytest.raises(UserError) as caught:
        engine.generate([ask(0)])
    assert "meta-llama/Llama-3.1-8B-Instruct" in caught.value.message and "mistral-7b" in caught.value.message
    assert "qwen-7b" in caught.value.message and "--model" in caught.value.hint
    assert server.chats() == []


def test_a_server_with_no_models_is_a_user_error() -> None:
    engine = make_engine(FakeServer(models=[]), model="")
    with pytest.raises(UserError, match="serves no models"):
        engine.served_model()


def test_a_models_endpoint_that_fails_is_a_user_error_with_the_status() -> None:
    engine = make_engine(FakeServer(list_models=lambda request: httpx.Response(404, text="not found")), model="")
    with pytest.raises(UserError, match="answered HTTP 404: not found") as caught:
        engine.served_model()
    assert "--base-url" in caught.value.hint


@pytest.mark.parametrize(("configured", "expected"), [(1536, 1536), (None, None)])
def test_context_window_falls_back_to_the_configured_one_when_the_server_lists_none(configured, expected) -> None:
    server = FakeServer(models=[model_entry("tiny")])
    engine = make_engine(server, model="", max_model_len=configured)
    assert engine.max_model_len == expected and engine.served_model() == "tiny"
    assert engine.max_model_len == expected and server.paths() == ["/v1/models"]


def test_a_configured_name_is_sent_without_asking_but_the_window_is_read_once() -> None:
    server = FakeServer(models=[model_entry("other", 512), model_entry("tiny", 3072)])
    engine = make_engine(server, model="tiny", max_model_len=1024)
    body = engine._request_body(ask(0))
    assert body["model"] == "tiny" and server.paths() == []
    [result] = engine.generate([ask(1)])
    assert result.ok and server.bodies()[0]["model"] == "tiny"
    # The fit check reads the window before the first request goes out.
    assert server.paths() == ["/v1/models", "/v1/chat/completions"]
    assert engine.max_model_len == 3072 and engine.max_model_len == 3072
    engine.generate([ask(2)])
    assert server.paths().count("/v1/models") == 1 and engine.served_model() == "tiny"


def test_a_configured_name_the_server_does_not_list_keeps_the_configured_window() -> None:
    server = FakeServer(models=[model_entry("other", 512)])
    engine = make_engine(server, model="tiny", max_model_len=1024)
    assert engine.max_model_len == 1024 and engine.served_model() == "tiny"
    assert server.paths() == ["/v1/models"]


# Request bodies


def test_json_constraint_travels_as_a_strict_json_schema_response_format(server, engine) -> None:
    answer = Pick(category="travel", reason="flights", ids=[3]).model_dump_json()
    server.answer = lambda body, request: completion(answer)
    [result] = engine.generate([ask(0, JsonConstraint(Pick), max_tokens=64, seed=7, temperature=0.5)])
    assert result.ok and result.value == Pick(category="travel", reason="flights", ids=[3])
    [body] = server.bodies()
    assert body["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "Pick", "schema": Pick.model_json_schema(), "strict": True}}
    assert "structured_outputs" not in body and "extra_body" not in body
    assert (body["max_tokens"], body["temperature"], body["seed"]) == (64, 0.5, 7)
    assert body["model"] == "served" and body["messages"] == [{"role": "user", "content": "question 0"}]


def test_regex_and_choice_travel_as_top_level_structured_outputs(server, engine) -> None:
    server.answer = lambda body, request: completion("2,5" if "regex" in body["structured_outputs"] else "support")
    results = engine.generate([ask(0, RegexConstraint(POSITIONS), max_tokens=40, seed=3), ask(1, max_tokens=8)])
    assert [result.value for result in results] == ["2,5", "support"]
    regex, choice = sorted(server.bodies(), key=question)
    assert regex["structured_outputs"] == {"regex": POSITIONS} and "response_format" not in regex
    assert (regex["max_tokens"], regex["temperature"], regex["seed"]) == (40, 0.0, 3)
    assert choice["structured_outputs"] == {"choice": list(OPTIONS)} and "response_format" not in choice
    assert choice["max_tokens"] == 8 and "seed" not in choice
    assert not any("extra_body" in body or "guided_regex" in body or "guided_choice" in body
                   for body in (regex, choice))


def test_the_extra_args_hook_travels_as_vllm_xargs_beside_the_constraint(server) -> None:
    """What a custom logits processor on the server reads (the forcing test against vLLM's server uses it)."""
    engine = make_engine(server, extra_args=lambda request: {"force": request.max_tokens} if request.seed else None)
    server.answer = lambda body, request: completion("2,5")
    engine.generate([ask(0, RegexConstraint(POSITIONS), max_tokens=40, seed=3), ask(1, RegexConstraint(POSITIONS))])
    hooked, plain = sorted(server.bodies(), key=question)
    assert hooked["vllm_xargs"] == {"force": 40} and hooked["structured_outputs"] == {"regex": POSITIONS}
    assert "vllm_xargs" not in plain and plain["structured_outputs"] == {"regex": POSITIONS}


def test_headers_carry_the_key_and_the_time_out(server) -> None:
    engine = make_engine(server, timeout_s=7.5)
    engine.generate([ask(0)])
    [request] = server.chats()
    assert request.headers["authorization"] == "Bearer EMPTY"
    assert float(request.headers["x-stainless-read-timeout"]) == 7.5


# Answers


def test_usage_and_finish_reasons_map_to_results(server, engine) -> None:
    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        i = question(body)
        if i == 0:
            return completion("support", prompt=21, generated=2, cached=16)
        if i == 1:
            return completion("sales le", finish="length", prompt=22, generated=body["max_tokens"], cached=8)
        return completion("sales", finish="abort", prompt=23, generated=1)

    server.answer = answer
    ok, cut, aborted = engine.generate([ask(0), ask(1, max_tokens=3), ask(2)])
    assert (ok.value, ok.finish_reason, ok.attempts, ok.prompt_tokens, ok.completion_tokens) == (
        "support", "stop", 1, 21, 2)
    assert not cut.ok and cut.finish_reason == "length" and cut.value is None and cut.attempts == 2
    assert cut.error == "answer cut off at 6 tokens" and cut.text == "sales le"
    assert (cut.prompt_tokens, cut.completion_tokens) == (22 + 22, 3 + 6)
    # The prefix-cache hits the server reported, summed over attempts like the tokens; none where it said nothing.
    assert (ok.prefix_cached_tokens, cut.prefix_cached_tokens, aborted.prefix_cached_tokens) == (16, 16, 0)
    assert engine.usage.total().prefix_cached_tokens == 32
    assert aborted.finish_reason == "error" and "'abort'" in aborted.error and aborted.value is None
    assert sorted(body["max_tokens"] for body in server.bodies() if question(body) == 1) == [3, 6]


def test_answers_come_back_in_request_order_when_the_server_answers_in_reverse() -> None:
    n = 6
    answered = [threading.Event() for _ in range(n)]
    finished: list[int] = []

    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        i = question(body)
        if i + 1 < n:
            answered[i + 1].wait(timeout=2)
        finished.append(i)
        answered[i].set()
        return completion(str(i), prompt=100 + i, generated=1 + i)

    server = FakeServer(answer)
    engine = make_engine(server, concurrency=n)
    results = engine.generate([ask(i, RegexConstraint("[0-9]")) for i in range(n)])
    assert finished == list(reversed(range(n)))
    assert [(r.value, r.prompt_tokens, r.completion_tokens) for r in results] == [
        (str(i), 100 + i, 1 + i) for i in range(n)]


def test_at_most_concurrency_requests_are_in_flight_and_order_survives_delays() -> None:
    in_flight, peak = [0], [0]
    lock = threading.Lock()

    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        i = question(body)
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.03 if i % 2 == 0 else 0.005)
        with lock:
            in_flight[0] -= 1
        return completion(str(i))

    engine = make_engine(FakeServer(answer), concurrency=2)
    results = engine.generate([ask(i, RegexConstraint("[0-9]")) for i in range(8)])
    assert [result.value for result in results] == [str(i) for i in range(8)]
    assert peak[0] == 2


# Retries


@pytest.mark.parametrize("status", [503, 429])
def test_the_client_retries_busy_answers_and_then_succeeds(status: int) -> None:
    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if len(server.chats()) <= 2:
            return server_error(status, "busy, try again")
        return completion("sales", prompt=30, generated=2)

    server = FakeServer(answer)
    engine = make_engine(server, max_retries=2)
    started = time.monotonic()
    [result] = engine.generate([ask(0, label="busy")])
    assert time.monotonic() - started < 1
    assert result.ok and result.value == "sales" and result.attempts == 1
    assert [request.headers["x-stainless-retry-count"] for request in server.chats()] == ["0", "1", "2"]
    stats = engine.usage.by_label["busy"]
    assert (stats.calls, stats.retries, stats.failures, stats.prompt_tokens) == (1, 0, 0, 30)


@pytest.mark.parametrize(("status", "max_retries"), [(503, 0), (400, 2)], ids=["no-client-retries", "not-retryable"])
def test_a_rejected_request_fails_with_the_status_and_the_servers_message(status: int, max_retries: int) -> None:
    message = "This model's maximum context length is 1024 tokens."
    server = FakeServer(lambda body, request: server_error(status, message))
    engine = make_engine(server, max_retries=max_retries)
    [result] = engine.generate([ask(0, label="rejected")])
    assert not result.ok and result.finish_reason == "error" and result.value is None
    assert f"HTTP {status}" in result.error and message in result.error
    # The client sends it once (no retries left, or a status it never retries); the engine's own retry once more.
    assert len(server.chats()) == 2 and result.attempts == 2
    stats = engine.usage.by_label["rejected"]
    assert (stats.calls, stats.retries, stats.failures) == (2, 1, 1)


def test_a_plain_text_error_page_is_the_message(server, engine) -> None:
    server.answer = lambda body, request: httpx.Response(502, headers=FAST_RETRY, text="Bad Gateway\n")
    [result] = engine.generate([ask(0)])
    assert result.error == "the server rejected the request (HTTP 502): Bad Gateway"


@pytest.mark.parametrize("content", [
    {"text": "<html>sign in</html>"}, {"json": {}},
    {"json": {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}},
], ids=["html", "empty-object", "no-choices"])
def test_an_answer_that_is_not_a_completion_fails_alone(server, engine, content: dict[str, Any]) -> None:
    server.answer = lambda body, request: completion("sales") if question(body) == 0 else httpx.Response(200, **content)
    fine, odd = engine.generate([ask(0), ask(1)])
    assert fine.ok and fine.value == "sales"
    assert odd.finish_reason == "error" and "not a chat completion" in odd.error and odd.attempts == 2


def test_the_engines_own_retry_of_an_invalid_answer_is_counted(server, engine) -> None:
    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if body["max_tokens"] == 8:
            return completion("maybe", prompt=15, generated=4)
        return completion("support", prompt=15, generated=2)

    server.answer = answer
    [result] = engine.generate([ask(0, label="retried")])
    assert result.ok and result.value == "support" and result.attempts == 2
    assert (result.prompt_tokens, result.completion_tokens) == (30, 6)
    first, second = server.bodies()
    assert (first["max_tokens"], first["temperature"]) == (8, 0.0)
    assert (second["max_tokens"], second["temperature"]) == (16, 0.3)
    stats = engine.usage.by_label["retried"]
    assert (stats.calls, stats.retries, stats.failures, stats.prompt_tokens, stats.completion_tokens) == (
        2, 1, 0, 30, 6)


# Time-outs and an unreachable server


def test_a_read_timeout_is_a_failed_result_that_names_the_limit() -> None:
    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        if question(body) == 1:
            raise httpx.ReadTimeout("timed out", request=request)
        return completion("sales")

    server = FakeServer(answer)
    engine = make_engine(server, timeout_s=0.25)
    fine, slow = engine.generate([ask(0), ask(1, label="slow")])
    assert fine.ok and fine.value == "sales"
    assert not slow.ok and slow.finish_reason == "error" and slow.attempts == 2
    assert f"no answer from {API} within 0.25 s" in slow.error and "timeout_s" in slow.error
    assert sum(question(body) == 1 for body in server.bodies()) == 2
    assert engine.usage.by_label["slow"].failures == 1


def test_a_connection_error_is_a_user_error_and_stops_the_round() -> None:
    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    server = FakeServer(answer)
    engine = make_engine(server, concurrency=1)
    with pytest.raises(UserError) as caught:
        engine.generate([ask(i) for i in range(5)])
    assert caught.value.message.startswith(f"cannot reach the model server at {API}")
    assert "--base-url" in caught.value.hint
    assert len(server.chats()) == 1


def test_an_unreachable_server_fails_discovery_with_the_same_user_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    engine = make_engine(FakeServer(list_models=refuse), model="")
    with pytest.raises(UserError, match="cannot reach the model server"):
        engine.generate([ask(0)])


# Usage accounting


def test_usage_per_label_is_the_sum_of_the_results(server, engine) -> None:
    def answer(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        i = question(body)
        if i % 3 == 0:
            return completion("sales", prompt=10 + i, generated=1 + i % 4)
        if i % 3 == 1:
            return completion("nonsense", prompt=10 + i, generated=5)
        return completion("sales lea", finish="length", prompt=10 + i, generated=body["max_tokens"])

    server.answer = answer
    requests = [ask(i, label="even" if i % 2 == 0 else "odd") for i in range(12)]
    results = engine.generate(requests)
    assert {r.finish_reason for r in results} == {"stop", "invalid", "length"}
    for label in ("even", "odd"):
        mine = [result for request, result in zip(requests, results, strict=True) if request.label == label]
        stats = engine.usage.by_label[label]
        assert stats.prompt_tokens == sum(r.prompt_tokens for r in mine) > 0
        assert stats.completion_tokens == sum(r.completion_tokens for r in mine) > 0
        assert stats.calls == sum(r.attempts for r in mine) and stats.retries == sum(r.attempts > 1 for r in mine)
        assert stats.failures == sum(not r.ok for r in mine) > 0
    assert engine.usage.total().calls == len(server.chats()) == 12 + 8
    assert engine.usage.total().prompt_tokens == sum(body_tokens(body) for body in server.bodies())


def body_tokens(body: dict[str, Any]) -> int:
    return 10 + question(body)


def test_a_prompt_larger_than_the_served_window_is_never_posted() -> None:
    server = FakeServer(models=[model_entry("served", 64)])
    engine = make_engine(server, model="", max_model_len=8192)
    long = Request([{"role": "user", "content": "question " * 200 + "1"}], ChoiceConstraint(OPTIONS), max_tokens=8,
                   label="design")
    short, big = engine.generate([ask(0, max_tokens=8), long])
    assert short.ok and not big.ok and "not sent" in big.error and "context window is 64" in big.error
    assert len(server.chats()) == 1 and question(server.bodies()[0]) == 0
    # The answer budget of the request that fits is lowered to what the window leaves.
    assert server.bodies()[0]["max_tokens"] <= 8
