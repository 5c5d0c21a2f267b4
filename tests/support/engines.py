"""The session vLLM engine lent to commands and servers (select it by name with the ``use_engine`` fixture)."""

from __future__ import annotations

from collections.abc import Sequence

from a2x_local.llm import Engine, Message, RawOutput, Request


class SharedEngine(Engine):
    """The session engine (fixture `vllm_engine`) behind a wrapper whose close() leaves it running: commands and
    servers close the engine they were given, and the other tests still need it."""

    name = "shared-vllm"

    def __init__(self, inner: Engine) -> None:
        super().__init__()
        self.inner = inner

    @property
    def max_model_len(self) -> int | None:
        return self.inner.max_model_len

    def describe(self) -> dict:
        return self.inner.describe()

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        return self.inner.count_prompt_tokens(messages)

    def _generate(self, requests: Sequence[Request]) -> list[RawOutput]:
        return self.inner._generate(requests)

    def reset_prefix_cache(self) -> bool:
        return self.inner.reset_prefix_cache()

