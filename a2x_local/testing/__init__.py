"""Stand-ins for a model, for tests and benchmarks only: no product module imports this package (a test pins it).

- `ScriptedEngine`: a deterministic engine answering each request by a rule, through the real engine interface;
  `registered_engine` makes it (or any engine) reachable by name, as `--engine NAME`, while a test runs;
- `WordPolicy`: a rule that builds word-based taxonomies (every build call);
- `SimulatedNavigator` (knows the correct services; perfect or with seeded errors) and `ReaderNavigator` (reads the
  offered lines, by embedding similarity): rules that make the search's decisions; `RandomNavigator` picks
  uniformly at random (the floor a model must stand above);
- `SelectEverything`, `FirstOption` and `Rambler`: models that decide badly (choose every option, choose by
  position, write on and on), for the guards against them;
- `uncached_tokens`: what a prefix-caching engine computes of one round of prompts; `PrefixCache` (a block-level
  LRU cache as vLLM keeps it) and `CacheMeter`: what it computes of a whole stream of rounds, by query.

`mcp_servers` (imported by its module path, run as `python -m a2x_local.testing.mcp_servers`) holds small MCP
servers for the gateway's tests and benchmark.

Like every other package, it uses the stages only through their public `__init__`.
"""

from a2x_local.testing.bad_models import FirstOption, Rambler, SelectEverything
from a2x_local.testing.build_policy import WordPolicy, categories_json, category_text
from a2x_local.testing.engine import ScriptedEngine, registered_engine
from a2x_local.testing.navigators import ReaderNavigator, SimulatedNavigator, listed_lines
from a2x_local.testing.prefix_cache import (
    BLOCK_TOKENS,
    DEFAULT_CACHE_TOKENS,
    CacheMeter,
    ComputedTokens,
    PrefixCache,
    uncached_tokens,
)
from a2x_local.testing.random_navigator import RandomNavigator

__all__ = [
    "BLOCK_TOKENS",
    "DEFAULT_CACHE_TOKENS",
    "CacheMeter",
    "ComputedTokens",
    "FirstOption",
    "PrefixCache",
    "Rambler",
    "RandomNavigator",
    "ReaderNavigator",
    "ScriptedEngine",
    "SelectEverything",
    "SimulatedNavigator",
    "WordPolicy",
    "categories_json",
    "category_text",
    "listed_lines",
    "registered_engine",
    "uncached_tokens",
]
