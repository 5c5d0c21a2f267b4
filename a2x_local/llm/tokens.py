"""Token counting with a real Qwen tokenizer that works offline (the `quicktok-v1` package).

Used where no engine tokenizer exists (the scripted engine, benchmarks, context-window estimates).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from a2x_local.llm.types import Message


@lru_cache(maxsize=1)
def _encoding():
    import quicktok

    return quicktok.get_encoding("qwen3")


def render_chatml(messages: Sequence[Message], *, add_generation_prompt: bool = True) -> str:
    """The ChatML text Qwen models see for these messages."""
    parts = [f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages]
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


def count_text_tokens(text: str) -> int:
    """Tokens of plain text (no special tokens)."""
    return _encoding().count(text)


def count_chat_tokens(messages: Sequence[Message]) -> int:
    """Prompt tokens of a chat as a Qwen model receives it, special tokens included."""
    return len(_encoding().encode_with_special(render_chatml(messages)))


def truncate_to_tokens(text: str, max_tokens: int) -> str:
    """The first ``max_tokens`` tokens of ``text``."""
    encoding = _encoding()
    return encoding.decode(encoding.encode(text)[:max_tokens])


def chat_token_ids(messages: Sequence[Message]) -> list[int]:
    """The token ids of a chat as a Qwen model receives it: what an engine's prefix cache matches on."""
    return list(_encoding().encode_with_special(render_chatml(messages)))


class ChatTokenCounter:
    """Prompt tokens of chat messages under a local model's own tokenizer and chat template, loaded on first use:
    what the vLLM and transformers engines count, for a process that does not hold the model (the driver of
    replicas). Only the folder and the template arguments travel when it is pickled."""

    def __init__(self, model_path: str, chat_template_kwargs: dict | None = None) -> None:
        self.model_path = str(model_path)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self._tokenizer = None

    def __getstate__(self) -> dict:
        return {"model_path": self.model_path, "chat_template_kwargs": self.chat_template_kwargs, "_tokenizer": None}

    def __call__(self, messages: Sequence[Message]) -> int:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
        text = self._tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False,
                                                   add_generation_prompt=True, **self.chat_template_kwargs)
        return len(self._tokenizer.encode(text, add_special_tokens=False))
