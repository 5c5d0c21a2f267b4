"""Make a model "want" a scripted answer, token by token, underneath the engine's output constraint.

A forced token survives only if the constraint allows it at that step; if the constraint masks it, every logit
is -inf and the answer derails. So "the scripted answer comes back unchanged" proves the constraint admits it,
e.g. that the comma in "2,5,7" is producible (the flaw STACK.md records for vLLM's `outlines` backend).

- vLLM (offline and server): `ForceTokens`, a per-request logits processor switched on by
  ``SamplingParams.extra_args["force_tokens"]`` (server: ``vllm_xargs``). Load it with
  ``LLM(logits_processors=[ForceTokens])`` or ``--logits-processors tests.support.forcing:ForceTokens``.
- transformers: `ForceTokensHF`, a `LogitsProcessor` for `model.generate`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import LogitsProcessor as HFLogitsProcessor
from vllm import SamplingParams
from vllm.v1.sample.logits_processor import AdapterLogitsProcessor

FORCE_KEY = "force_tokens"


def _force(step: int, targets: Sequence[int], logits: torch.Tensor) -> torch.Tensor:
    if step >= len(targets):
        return logits
    target = int(targets[step])
    forced = torch.full_like(logits, float("-inf"))
    forced[..., target] = logits[..., target]
    return forced


class _RequestForcer:
    def __init__(self, targets: Sequence[int]) -> None:
        self.targets = [int(t) for t in targets]

    def __call__(self, output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
        return _force(len(output_ids), self.targets, logits)


class ForceTokens(AdapterLogitsProcessor):
    """vLLM v1 logits processor; a no-op for requests without ``force_tokens``."""

    def is_argmax_invariant(self) -> bool:
        return False

    def new_req_logits_processor(self, params: SamplingParams) -> _RequestForcer | None:
        targets = (params.extra_args or {}).get(FORCE_KEY)
        return _RequestForcer(targets) if targets else None


class ForceTokensHF(HFLogitsProcessor):
    """transformers logits processor; ``targets[row]`` is None for rows left alone."""

    def __init__(self, targets: Sequence[Sequence[int] | None], prompt_width: int) -> None:
        self.targets = list(targets)
        self.prompt_width = prompt_width

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        step = input_ids.shape[1] - self.prompt_width
        for row, targets in enumerate(self.targets):
            if targets:
                scores[row] = _force(step, targets, scores[row])
        return scores
