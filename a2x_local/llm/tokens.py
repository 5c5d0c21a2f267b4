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
