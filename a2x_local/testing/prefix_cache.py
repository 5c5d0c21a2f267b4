"""What a prefix-caching engine computes of one round: each prompt's tokens after the longest prefix it shares with
an earlier prompt of the same round (those are served from the cache). A measure for benchmarks: the search lays
its prompts out so that this stays small (shared instructions and lists first, the query last).

Counted per token; vLLM caches whole blocks (16 tokens by default), so it computes up to a block more per prompt.
"""

from __future__ import annotations

from collections.abc import Sequence


def uncached_tokens(prompts: Sequence[Sequence[int]]) -> list[int]:
    """For each prompt (token ids, in round order), its length minus its longest prefix shared with an earlier one.

    A trie of the round's prompts, one dict per token: each prompt walks it as far as it matches, then adds its
    remaining tokens, so the work is linear in the round's tokens.
    """
    root: dict[int, dict] = {}
    result = []
    for tokens in prompts:
        node, shared = root, 0
        while shared < len(tokens) and tokens[shared] in node:
            node = node[tokens[shared]]
            shared += 1
        for token in tokens[shared:]:
            node = node.setdefault(token, {})
        result.append(len(tokens) - shared)
    return result
