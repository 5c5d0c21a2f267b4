"""What a2x-local is assembled from beyond each stage's own parts, registered in one place.

Every process that runs a2x-local calls `register_components` once before it does anything else: the CLI's
`build_app` does, a test or a script that starts a server or runs methods without the CLI does too. Nothing here
runs on import, so importing a stage, the CLI's modules or this package registers nothing. This package sits above
every stage (it names them all), beside the CLI; only composition roots import it.
"""

from __future__ import annotations

import importlib

from a2x_local.components.plugins import load_plugins

__all__ = ["register_components"]

# Every stage, lowest floor first: importing a stage's package declares its configuration tables (`table_models`)
# and its error types.
STAGES = ("registry", "llm", "taxonomy", "search", "compose", "evaluation", "lifecycle", "gateway", "serve",
          "delivery")


def register_components() -> list[str]:
    """Declare every stage's configuration tables and error types (by importing the stage packages: what
    `check_config` and the docs' reference read), register the methods of the stages above search (compose's), then
    the plug-ins' engines and methods (entry points). Safe to run again; returns a line per plug-in skipped."""
    for stage in STAGES:
        importlib.import_module(f"a2x_local.{stage}")
    from a2x_local.compose import COMPOSE_SPEC
    from a2x_local.search import register_method

    register_method(COMPOSE_SPEC, replace=True)
    return load_plugins()
