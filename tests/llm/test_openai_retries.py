"""The openai engine keeps the client's own retries (issue 35): against a real HTTP server on 127.0.0.1, busy answers
(429, 503) are asked again by the `openai` client, with its retry-count header and the server's retry-after, and the
engine classifies only the error left at the end."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from a2x_local.llm import Request
from a2x_local.llm.config import OpenAIConfig
from a2x_local.llm.openai_engine import OpenAIEngine
from a2x_local.llm.types import ChoiceConstraint

# status, body, headers of one answer; ``seen`` is the number of chat requests so far (this one included).
Script = Callable[[int], tuple[int, dict[str, Any], dict[str, str]]]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: Script) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)     # port 0: the system picks, no bind-release race
        self.script = script
        self.retry_counts: list[str] = []
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self._send(200, {"object": "list", "data": [{"id": "served", "object": "model", "max_model_len": 4096}]}, {})

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        with self.server.lock:
            self.server.retry_counts.append(self.headers.get("x-stainless-retry-count", ""))
            seen = len(self.server.retry_counts)
        self._send(*self.server.script(seen))

    def _send(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {"content-type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def serve() -> Iterator[Callable[[Script], tuple[str, _Server]]]:
    started: list[_Server] = []

    def start(script: Script) -> tuple[str, _Server]:
        server = _Server(script)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started.append(server)
        host, port = server.server_address[:2]
        return f"http://{host}:{port}/v1", server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def _busy(status: int, message: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    # retry-after-ms keeps the client's backoff in milliseconds.
    return status, {"error": {"message": message, "type": "ServerError", "code": status}}, {"retry-after-ms": "1"}


def _completion(text: str) -> tuple[int, dict[str, Any], dict[str, str]]:
    return 200, {"id": "c", "object": "chat.completion", "created": 0, "model": "served",
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10}}, {}


def _engine(url: str, max_retries: int) -> OpenAIEngine:
    config = OpenAIConfig.defaults(base_url=url, timeout_s=5.0, max_retries=max_retries, concurrency=1)
    return OpenAIEngine(config, model="served", max_model_len=4096)


def _ask() -> Request:
    return Request([{"role": "user", "content": "which?"}], ChoiceConstraint(("sales", "support")), max_tokens=4)


@pytest.mark.parametrize("status", [429, 503])
def test_the_client_retries_a_busy_server_until_it_answers(serve, status: int):
    url, server = serve(lambda seen: _busy(status, "busy") if seen <= 2 else _completion("sales"))
    with _engine(url, max_retries=2) as engine:
        [result] = engine.generate([_ask()])
    assert result.ok and result.value == "sales" and result.attempts == 1
    # The client's own loop: three sends of one request, numbered by its header.
    assert server.retry_counts == ["0", "1", "2"]


@pytest.mark.parametrize("status", [429, 503])
def test_only_the_error_left_after_the_clients_retries_is_classified(serve, status: int):
    url, server = serve(lambda seen: _busy(status, "the queue is full"))
    with _engine(url, max_retries=1) as engine:
        [result] = engine.generate([_ask()])
    assert not result.ok and result.finish_reason == "error"
    assert result.error == f"the server rejected the request (HTTP {status}): the queue is full"
    # Each of the engine's two attempts (its retry of a failed answer) is one client call of 1 + 1 sends.
    assert result.attempts == 2 and server.retry_counts == ["0", "1", "0", "1"]
