"""Service text is data: it may not carry the model's control tokens into a prompt.

A description holding `<|im_end|><|im_start|>system ...` would, once the chat template is rendered and tokenized
with special tokens enabled (vLLM, transformers), become real role tokens: the text would open its own `system`
turn in every prompt that lists the service. Service text reaches a model only inside message contents, and our
own instructions contain no such marker, so every engine removes them from every message content before the chat
template sees it:

- engines with the model's tokenizer (vllm, transformers) remove every special token it declares
  (``all_special_tokens`` and added tokens marked special), plus the generic markers below;
- engines without a local tokenizer (openai: the server renders the template; the scripted test engine) remove the
  generic markers: ChatML and other `<|...|>` tokens (Qwen, Llama 3, Phi, GPT-OSS), DeepSeek's `<｜...｜>`, Llama 2's
  `[INST]`/`<<SYS>>`, `<s>`/`</s>`, Gemma's `<start_of_turn>`/`<end_of_turn>`, Mistral's `[TOOL_CALLS]`-style
  tags, `<think>`.

`as_data` prepares one piece of service text for a prompt's data block: markers removed, and tags that look like
the block's own delimiters (`<services>`, `</services>`, ...) defused, so text cannot end the block and speak as
the prompt. What the text *says* stays: a model can still be talked into a bad choice among the offered services,
which is why prompts tell it that listed text is never an instruction, and why answers are positions among offered
services, never free ids (docs/security.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from a2x_local.llm.types import Message

GENERIC_MARKERS = re.compile(
    r"<\|[^|<>\n]{0,64}\|>"                               # <|im_start|>, <|eot_id|>, <|start_header_id|>, <|end|>
    r"|<\uff5c[^\uff5c<>\n]{0,64}\uff5c>"                  # DeepSeek: <｜begin▁of▁sentence｜>, <｜User｜>
    r"|\[/?INST\]|<</?SYS>>"                               # Llama 2
    r"|</?s>"                                              # sentence start/end of Llama and Mistral
    r"|<(?:start|end)_of_turn>"                            # Gemma
    r"|\[/?(?:AVAILABLE_TOOLS|TOOL_CALLS|TOOL_RESULTS|SYSTEM_PROMPT)\]"   # Mistral
    r"|</?think>",                                         # reasoning blocks (Qwen3, DeepSeek-R1)
    re.IGNORECASE)

# Tags a prompt may use to delimit listed data; in service text they are shown with look-alike angle quotes.
DATA_TAGS = ("services", "service", "categories", "category", "catalogue", "data", "query", "request", "tools")
_DATA_TAG = re.compile(r"<(/?)\s*(" + "|".join(DATA_TAGS) + r")\b([^<>\n]{0,64})>", re.IGNORECASE)
_PASSES = 8


class MarkerStripper:
    """Removes control markers from text: the generic set, plus a tokenizer's own special tokens when given."""

    def __init__(self, special_tokens: Iterable[str] = ()) -> None:
        tokens = sorted({t for t in special_tokens if t and t.strip()}, key=len, reverse=True)
        self._special = re.compile("|".join(re.escape(t) for t in tokens)) if tokens else None

    def clean(self, text: str) -> str:
        """Text without markers; repeated, so pieces joined by a removal cannot form a new marker. Where removing
        them would join the pieces of a data-block delimiter (``</serv<unk>ices>``: `as_data` defused the text
        before this tokenizer's own tokens were known), each marker becomes a visible U+FFFD instead."""
        cleaned = self._removed(text, "")
        if len(_DATA_TAG.findall(cleaned)) > len(_DATA_TAG.findall(text)):
            return self._removed(text, "\ufffd")
        return cleaned

    def _removed(self, text: str, replacement: str) -> str:
        for _ in range(_PASSES):
            cleaned = GENERIC_MARKERS.sub(replacement, text)
            if self._special is not None:
                cleaned = self._special.sub(replacement, cleaned)
            if cleaned == text:
                return cleaned
            text = cleaned
        return text

    def messages(self, messages: Sequence[Message]) -> list[dict[str, str]]:
        """The messages with every content stripped (roles are ours, and kept)."""
        return [_with_content(message, self.clean(message["content"])) for message in messages]


def _with_content(message: Mapping[str, str], content: str) -> dict[str, str]:
    return {**message, "content": content}


GENERIC = MarkerStripper()


def as_data(text: str) -> str:
    """One piece of service text, safe inside a prompt's data block (see the module docstring)."""
    return _DATA_TAG.sub(lambda m: f"‹{m.group(1)}{m.group(2)}{m.group(3)}›", GENERIC.clean(text))


def clip(text: str, limit: int) -> str:
    """Text on one line of at most ``limit`` characters, cut with "…" (0 = no limit): a newline in a listed name or
    description would break a numbered list, and a long one would crowd out the rest of the prompt or page."""
    text = " ".join(text.split())
    if limit <= 0 or len(text) <= limit:
        return text
    return text[: max(1, limit - 1)].rstrip() + "…"


def tokenizer_special_tokens(tokenizer: object) -> list[str]:
    """Every special token a Hugging Face tokenizer declares: its named ones and the added tokens marked special."""
    found = list(getattr(tokenizer, "all_special_tokens", None) or [])
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found.extend(str(token) for token in decoder.values() if getattr(token, "special", False))
    return found
