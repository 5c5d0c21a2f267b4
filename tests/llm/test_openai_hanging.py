"""A server that accepts connections and never answers: the round fails in about `timeout_s`, not four times it (the
client used to retry time-outs `max_retries` times, and the engine once more)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from a2x_local.errors import UserError
from a2x_local.llm import Request
from a2x_local.llm.config import OpenAIConfig
from a2x_local.llm.openai_engine import OpenAIEngine
from a2x_local.llm.types import ChoiceConstraint


@pytest.fixture
def hanging_url() -> Iterator[str]:
    """A socket on 127.0.0.1 that takes every connection and reads nothing back to the client."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    server.close()
    for connection in held:
        connection.close()


def test_a_hanging_server_fails_the_round_in_about_the_timeout(hanging_url):
    config = OpenAIConfig.defaults(base_url=hanging_url, timeout_s=1.0, max_retries=3, concurrency=4)
    engine = OpenAIEngine(config, model="served", max_model_len=4096)
    requests = [Request([{"role": "user", "content": f"q{i}"}], ChoiceConstraint(("a", "b")), max_tokens=4)
                for i in range(3)]
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        engine.generate(requests)
    elapsed = time.monotonic() - started
    assert "accepts connections but does not answer" in caught.value.message
    assert "timeout_s" in caught.value.message and "Check the server" in caught.value.hint
    # One time-out (1 s) and one /models probe (at most 1 s here): not (1 + 3 retries) x 2 attempts.
    assert elapsed < 3.5, elapsed
    engine.close()
