"""An OpenAI-compatible model server on the local network (`vllm serve`, llama.cpp server) behind the batch interface.

Only the URL the user gives is contacted. The official `openai` client does the HTTP work and its own retries
(`max_retries` of `[engine.openai]`: connection errors and 408/409/429/5xx answers, with its backoff and the server's
retry-after); the engine classifies only the error left after them. Time-outs are the exception: the client would
retry them too, and a hanging server then took about four times `timeout_s` per request to fail, so the transport
below turns a time-out into the client's own `APITimeoutError`, which the client passes on without retrying. A
request that times out instead asks the server's /models (a few seconds at most): a server that answers that is
slow, and the request fails alone; one that does not is hanging, and the round stops with an error. A thread pool
bounds how many requests are in flight so a big round does not flood the server.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlparse

import httpx

from a2x_local.errors import UserError
from a2x_local.extras import require
from a2x_local.llm.base import Engine
from a2x_local.llm.config import OpenAIConfig
from a2x_local.llm.constraints import openai_body
from a2x_local.llm.types import ExtraArgs, RawOutput, Request


def normalise_base_url(url: str) -> str:
    """`http://host:port` and `http://host:port/v1` both mean the server's /v1 API."""
    url = url.strip().rstrip("/")
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UserError(f"'{url}' is not an http(s) URL", hint="Pass --base-url http://HOST:PORT/v1.")
    if parsed.path in ("", "/"):
        url += "/v1"
    return url


class OpenAIEngine(Engine):
    """Requests go to ``base_url`` concurrently (at most ``concurrency`` at once), answers come back in order.

    ``model`` is the name the server knows the model by; when empty the server is asked and must serve exactly
    one model, or one whose name matches one of ``candidates`` (an alias, its source repository, a path).
    The context window is what the server reports for the model (vLLM lists `max_model_len` on /v1/models), read
    once before the first request is built; ``max_model_len`` (the `[engine]` setting) stands in when it reports
    none, so prompts are fit-checked either way. The server renders the chat template and its tokenizer is not
    here, so message contents lose the generic chat-template markers only (sanitize.py lists them).
    ``extra_args(request)`` (a hook, as on the vllm engine) gives a request's `vllm_xargs`, what a custom logits
    processor the server loaded reads.
    """

    name = "openai"

    def __init__(self, config: OpenAIConfig, *, model: str = "", candidates: Sequence[str] = (),
                 max_model_len: int | None = None, transport: httpx.BaseTransport | None = None,
                 extra_args: ExtraArgs | None = None) -> None:
        super().__init__()
        if not config.base_url:
            raise UserError("the openai engine needs the server's URL",
                            hint="Pass --base-url http://HOST:PORT/v1 or set base_url in [engine.openai].")
        openai = require("openai", feature="the openai engine")

        self.config = config
        self.base_url = normalise_base_url(config.base_url)
        self._model = model
        self._candidates = [c for c in candidates if c]
        self._fallback_window = max_model_len
        self._context_window: int | None = None
        self._discovered = False
        self.extra_args = extra_args
        # ``transport`` (an httpx transport): httpx.MockTransport answers with no server (tests), and
        # HTTPTransport(uds=PATH) reaches a server listening on a Unix socket (`vllm serve --uds PATH`).
        http_client = httpx.Client(transport=_TimeoutsFinal(transport or httpx.HTTPTransport()),
                                   timeout=config.timeout_s, follow_redirects=True)
        self._client = openai.OpenAI(base_url=self.base_url, api_key=config.api_key or "EMPTY",
                                     timeout=config.timeout_s, max_retries=config.max_retries,
                                     http_client=http_client)

    @property
    def max_model_len(self) -> int | None:
        """The served model's context window (asked once), else the configured one."""
        if not self._discovered:
            self._discover()
        return self._context_window or self._fallback_window

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "base_url": self.base_url, "model": self._model or None,
                "concurrency": self.config.concurrency, "timeout_s": self.config.timeout_s,
                "max_retries": self.config.max_retries,
                "max_model_len": self._context_window or self._fallback_window}

    def served_model(self) -> str:
        """The model name to send, asking the server once when it was not configured."""
        if not self._model and not self._discovered:
            self._discover()
        return self._model

    def _discover(self) -> None:
        """Ask the server which models it serves: the name to send (unless configured) and the context window."""
        import openai

        try:
            # At most one retry: a server that does not list its models within two time-outs is not going to answer.
            served = list(self._client.with_options(max_retries=min(self.config.max_retries, 1)).models.list())
        except openai.APITimeoutError as exc:
            raise self._down_error(_Hanging(f"/models gave no answer within {self.config.timeout_s:g} s (timeout_s)")
                                   ) from exc
        except openai.APIConnectionError as exc:
            raise self._down_error(exc) from exc
        except openai.APIStatusError as exc:
            raise UserError(f"{self.base_url}/models answered HTTP {exc.status_code}: {_detail(exc)}",
                            hint="Is this an OpenAI-compatible server? Check --base-url.") from exc
        names = [m.id for m in served]
        wanted = [self._model] if self._model else self._candidates
        chosen = next((m for m in served if any(_same_model(m.id, c) for c in wanted)), None)
        if chosen is None and len(served) == 1 and not self._model:
            chosen = served[0]
        if chosen is None and not self._model:
            raise UserError(f"{self.base_url} serves {names or 'no models'}; none matches {self._candidates}",
                            hint="Pass the served name with --model, or set served_model in [engine.openai].")
        if chosen is not None:
            self._model = chosen.id
            window = getattr(chosen, "max_model_len", None) or (chosen.model_extra or {}).get("max_model_len")
            self._context_window = int(window) if window else None
        self._discovered = True

    def _down_error(self, exc: Exception) -> UserError:
        if isinstance(exc, _Hanging):
            return UserError(f"the model server at {self.base_url} accepts connections but does not answer: {exc}",
                             hint="Check the server (stuck, or overloaded: lower concurrency in [engine.openai]),"
                             " or raise timeout_s for very long answers.")
        return UserError(f"cannot reach the model server at {self.base_url}: {exc}",
                         hint="Start it (see README, engines) or fix --base-url; nothing else is contacted.")

    def _request_body(self, request: Request) -> dict[str, Any]:
        """Arguments for `chat.completions.create`; non-standard fields travel in ``extra_body``."""
        body: dict[str, Any] = {"model": self.served_model(), "messages": [dict(m) for m in request.messages],
                                "max_tokens": request.max_tokens, "temperature": request.temperature}
        if request.seed is not None:
            body["seed"] = request.seed
        fields = openai_body(request.constraint)
        if "response_format" in fields:
            body["response_format"] = fields.pop("response_format")
        extra = self.extra_args(request) if self.extra_args is not None else None
        if extra:
            fields["vllm_xargs"] = dict(extra)
        if fields:
            body["extra_body"] = fields
        return body

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        self.served_model()
        down = threading.Event()
        failures: list[Exception] = []

        def one(request: Request) -> RawOutput:
            if down.is_set():
                return RawOutput("", 0, 0, "error", error="not sent: the server is unreachable")
            try:
                return self._call(request)
            except _ServerDown as exc:
                down.set()
                failures.append(exc.cause)
                return RawOutput("", 0, 0, "error", error=str(exc.cause))

        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(requests))) as pool:
            outputs = list(pool.map(one, requests))
        if failures:
            raise self._down_error(failures[0]) from failures[0]
        return outputs

    def _call(self, request: Request) -> RawOutput:
        """One request; the client retries what is worth retrying, and only its last error is classified here."""
        import openai

        try:
            response = self._client.chat.completions.create(**self._request_body(request))
        except openai.APITimeoutError as exc:
            self._check_alive(exc)
            return RawOutput("", 0, 0, "error", error=(
                f"no answer from {self.base_url} within {self.config.timeout_s:g} s (the server is up but slow):"
                " raise timeout_s in [engine.openai] or lower the load"))
        except openai.APIConnectionError as exc:
            raise _ServerDown(exc) from exc
        except openai.APIStatusError as exc:
            return RawOutput("", 0, 0, "error", error=f"the server rejected the request (HTTP {exc.status_code}):"
                                                       f" {_detail(exc)}")
        if not getattr(response, "choices", None):
            # A proxy's HTML page or an empty JSON object answered with 200: fail this request, not the round.
            shown = response[:200] if isinstance(response, str) else "no choices"
            return RawOutput("", 0, 0, "error", error=f"the server's answer is not a chat completion: {shown!r}")
        choice = response.choices[0]
        usage = response.usage
        prompt_tokens = usage.prompt_tokens if usage else 0
        completion_tokens = usage.completion_tokens if usage else 0
        # Servers with a prefix cache (vLLM, most providers) say how much of the prompt it served.
        details = getattr(usage, "prompt_tokens_details", None)
        prefix_cached = int(getattr(details, "cached_tokens", 0) or 0)
        text = choice.message.content or ""
        if choice.finish_reason in ("stop", "length"):
            return RawOutput(text, prompt_tokens, completion_tokens, choice.finish_reason,
                             prefix_cached_tokens=prefix_cached)
        return RawOutput(text, prompt_tokens, completion_tokens, "error", prefix_cached_tokens=prefix_cached,
                         error=f"the server finished with reason {choice.finish_reason!r}")

    def _check_alive(self, timed_out: Exception) -> None:
        """After a time-out: a server whose /models does not answer within a few seconds is hanging."""
        import openai

        probe = min(self.config.timeout_s, _PROBE_S)
        try:
            self._client.models.list(timeout=probe)
        except openai.APIConnectionError as exc:
            raise _ServerDown(_Hanging(f"no answer within {self.config.timeout_s:g} s (timeout_s), and /models gave"
                                       f" none within {probe:g} s")) from exc
        except openai.APIStatusError:
            return      # it answered: alive

    def close(self) -> None:
        self._client.close()


_PROBE_S = 5.0


class _TimeoutsFinal(httpx.BaseTransport):
    """The client's transport, with a time-out raised as the client's own `APITimeoutError`: the client passes its
    own errors on without retrying them, so a hanging server costs one `timeout_s`, then the /models probe
    (`OpenAIEngine._check_alive`) tells hanging from slow. Every other error and status is the client's to retry."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        import openai

        try:
            return self._inner.handle_request(request)
        except httpx.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc

    def close(self) -> None:
        self._inner.close()


class _Hanging(Exception):
    """The server took the connection but answered neither the request nor /models."""


def _same_model(served: str, candidate: str) -> bool:
    """"Qwen/Qwen2.5-7B-Instruct" is the folder "Qwen2.5-7B-Instruct" and "/models/Qwen2.5-7B-Instruct"."""
    served, candidate = served.rstrip("/"), candidate.rstrip("/")
    return served == candidate or served.endswith("/" + candidate) or candidate.endswith("/" + served)


class _ServerDown(Exception):
    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _detail(exc: Any) -> str:
    """The server's own explanation, which vLLM puts in the JSON body."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body["error"] if isinstance(body.get("error"), dict) else body
        if inner.get("message"):
            return str(inner["message"])[:500]
    elif isinstance(body, str) and body.strip():
        # A plain-text error page (a proxy's "Bad Gateway"); the openai client keeps only the status in its message.
        return body.strip()[:500]
    return str(getattr(exc, "message", exc))[:500]
