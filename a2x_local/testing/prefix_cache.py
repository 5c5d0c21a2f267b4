"""What a prefix-caching engine computes: prompt tokens minus the prefix its cache already holds, plus decode.

Two measures for benchmarks, both on token ids (the prompts as the model's tokenizer writes them):

- `uncached_tokens`: one round alone, counted per token, with an unbounded cache (each prompt minus the longest
  prefix it shares with an earlier prompt of the round);
- `PrefixCache`: the cache an engine keeps across rounds and queries, simulated the way vLLM's automatic prefix
  caching works: whole blocks of ``block_tokens`` (16) tokens, a block identified by its tokens and every token
  before it, at most all but the prompt's last token served from the cache (that one is computed for the next-token
  logits), and least recently used blocks evicted when ``capacity_tokens`` are held. ``scripts/bench_prefix_cache.py``
  checks it against vLLM's own count.

The search lays its prompts out so that both stay small: what repeats across queries first and identical, the
query last. `CacheMeter` applies one cache to a stream of engine rounds and sums per query and per call type.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

# vLLM's default block size; the unit its prefix cache stores and matches.
BLOCK_TOKENS = 16
# What one 80 GB GPU holds beside a 4-bit 32B model's weights (docs/search-design.md "What the engine computes").
DEFAULT_CACHE_TOKENS = 200_000


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


class PrefixCache:
    """A simulated persistent prefix cache: ``cached(prompt)`` says how many of the prompt's tokens it serves,
    then holds the prompt's full blocks (most recently used).

    As in vLLM: a block is keyed by a hash chained over every block before it, so only a prefix can match; a
    prompt's partial last block is never cached; a prompt served whole still computes its last token, so at most
    ``len - 1`` tokens (rounded down to blocks) come from the cache. Eviction is least recently used, and a
    prompt's blocks are released last block first (vLLM's free queue), so a long tail goes before the shared head.
    Prompts are taken one at a time in order; an engine running a round's requests side by side matches the same
    prefixes (it caches a block as soon as it is scheduled), but may evict a little differently when full.
    """

    def __init__(self, capacity_tokens: int = DEFAULT_CACHE_TOKENS, block_tokens: int = BLOCK_TOKENS) -> None:
        if block_tokens < 1 or capacity_tokens < 0:
            raise ValueError("the block size is at least 1 token and the capacity at least 0")
        self.block_tokens = block_tokens
        self.capacity_blocks = capacity_tokens // block_tokens
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.evicted = 0

    @property
    def capacity_tokens(self) -> int:
        return self.capacity_blocks * self.block_tokens

    @property
    def held_tokens(self) -> int:
        return len(self._blocks) * self.block_tokens

    def _keys(self, tokens: Sequence[int]) -> list[int]:
        size, keys, parent = self.block_tokens, [], 0
        for start in range(0, len(tokens) - size + 1, size):
            parent = hash((parent, tuple(tokens[start:start + size])))
            keys.append(parent)
        return keys

    def cached(self, tokens: Sequence[int]) -> int:
        """Tokens of this prompt served from the cache; the prompt's blocks are then cached (or refreshed)."""
        keys = self._keys(tokens)
        usable = max(0, len(tokens) - 1) // self.block_tokens
        hits = 0
        while hits < usable and keys[hits] in self._blocks:
            hits += 1
        for key in reversed(keys):
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)
            self.evicted += 1
        return hits * self.block_tokens


@dataclass
class ComputedTokens:
    """Tokens of some requests: sent (prompt), served from the prefix cache, generated (completion)."""

    prompt: int = 0
    cached: int = 0
    completion: int = 0
    calls: int = 0

    @property
    def computed(self) -> int:
        """What the engine computes: prompt tokens not served from the cache, plus decode."""
        return self.prompt - self.cached + self.completion

    def add(self, prompt: int, cached: int, completion: int) -> None:
        self.prompt += prompt
        self.cached += cached
        self.completion += completion
        self.calls += 1

    def to_dict(self) -> dict[str, int]:
        return {"prompt_tokens": self.prompt, "cached_prompt_tokens": self.cached,
                "completion_tokens": self.completion, "computed_tokens": self.computed, "calls": self.calls}


@dataclass
class CacheMeter:
    """One simulated cache over a stream of engine rounds: ``observe(requests, results)`` after each round (in
    arrival order) sums each request's cost under its owner (``owner(request)``: a query, a build step) and its
    call type. ``tokenize`` turns a request's messages into the token ids the engine would see."""

    tokenize: Callable[[Sequence[dict]], list[int]]
    cache: PrefixCache = field(default_factory=PrefixCache)
    owner: Callable[[object], str] = lambda request: ""
    by_owner: dict[str, ComputedTokens] = field(default_factory=dict)
    by_label: dict[str, ComputedTokens] = field(default_factory=dict)

    def observe(self, requests: Sequence, results: Sequence) -> list[int]:
        """Account one round; returns each request's cached prompt tokens. Results carry the prompt and completion
        token counts the engine reported (retries included); the cache sees each prompt once."""
        cached_counts = []
        for request, result in zip(requests, results, strict=True):
            tokens = self.tokenize(request.messages)
            attempts = getattr(result, "attempts", 1)   # 0: never sent; 2: sent again (a retry)
            cached = sum(self.cache.cached(tokens) for _ in range(attempts))
            prompt = result.prompt_tokens or len(tokens) * attempts
            for table, key in ((self.by_owner, self.owner(request)), (self.by_label, request.label)):
                table.setdefault(key, ComputedTokens()).add(prompt, min(cached, prompt), result.completion_tokens)
            cached_counts.append(cached)
        return cached_counts

    def total(self) -> ComputedTokens:
        total = ComputedTokens()
        for cost in self.by_label.values():
            total.prompt += cost.prompt
            total.cached += cost.cached
            total.completion += cost.completion
            total.calls += cost.calls
        return total
