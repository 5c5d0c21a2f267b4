"""A served registry for the server's tests: the hand-made tree of the search tests (tests/search/a2x_helpers.py)
with its services, a second tree to switch to, an oracle engine, and servers over them (in-process, or a real
`a2x-local serve` process on a free loopback port)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from a2x_local.components import register_components
from a2x_local.db import connect
from a2x_local.llm import Engine, Request
from a2x_local.registry import Registry
from a2x_local.serve.config import ServeConfig
from a2x_local.serve.server import Server, build_server
from a2x_local.settings import load_settings
from a2x_local.taxonomy import store
from a2x_local.taxonomy.types import Tree
from tests.search.a2x_helpers import Oracle, make_tree, sample_tree, store_registry_and_tree
from tests.support.processes import cli_command, tree_env
from tests.support.servers import bound_port, serving

ROOT = Path(__file__).resolve().parents[2]
WANTED = {"find hotels": {"h1", "h2"}, "stock prices": {"s1", "s2"}}
# A second tree over the same services, with other names, to switch to.
OTHER_SHAPE = {
    "root": ("Everything", []),
    "root/1": ("Trips", ["t0", "f1", "f2", "f3", "h1", "h2"]),
    "root/2": ("Money", ["p1", "p2", "s1", "s2", "s3", "s4"]),
    "root/3": ("Sky", ["w1", "w2", "w3", "w4", "g1"]),
}
# Quick to start: no method is loaded before the first request, and bm25 needs no embedding model. A request waits
# for a method rebuilt for a changed registry (so the tests see the new tree at once, however slow the machine).
TEST_SERVE = {"preload": [], "default_method": "bm25", "rebuild_wait_s": 120.0, "loading_wait_s": 120.0}


def registry_with_trees(db_path: Path) -> tuple[int, int]:
    """The sample registry with the sample tree active and OTHER_SHAPE stored beside it: (active id, other id)."""
    active = store_registry_and_tree(db_path, sample_tree())
    other = store_tree(db_path, make_tree(OTHER_SHAPE))
    return active, other


def store_tree(db_path: Path, tree: Tree, *, activate: bool = False) -> int:
    with connect(db_path) as con:
        return store.save_completed(con, tree, kind="import", fingerprint=Registry(con).fingerprint(), stats={},
                                    make_active=activate, source="test")


def serve_config(**overrides: object) -> ServeConfig:
    return ServeConfig.defaults(**{**TEST_SERVE, **overrides})


def make_server(db_path: Path, engine: Engine | None = None, *, ready: bool = True, **overrides: object) -> Server:
    """A server over ``db_path``, its background loading started (and, with ``ready``, finished). The sample trees
    are so small that direct selection would skip the descent these tests watch: it is off here."""
    register_components()   # the composition root's registrations, as `a2x-local serve` runs them first
    settings = load_settings(db=db_path).with_overrides("search", direct_select_below=0, other_services_child="root")
    server = build_server(settings, serve_config(**overrides), engine=engine)
    server.start_loading()
    if ready:
        assert server.state.wait_ready(120), server.state.loading.to_dict()
    return server


def write_test_config(home: Path, **serve: object) -> Path:
    """A config file giving a server process the quick-start [serve] settings, ``serve`` over them."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "serve-test.toml"
    path.write_text("[serve]\n" + "".join(f"{key} = {json.dumps(value)}\n"
                                          for key, value in {**TEST_SERVE, **serve}.items()), encoding="utf-8")
    return path


def server_env(home: Path, **serve: object) -> dict[str, str]:
    """The environment of a server process: its own home, the test [serve] settings (``serve`` over them)."""
    env = tree_env(A2X_HOME=str(home), A2X_CONFIG=str(write_test_config(home, **serve)), HF_HUB_OFFLINE="1",
                   TRANSFORMERS_OFFLINE="1")
    env.pop("A2X_DB", None)
    env.pop("A2X_SERVE_TOKEN", None)
    return env


def stdio_server(db_path: Path, home: Path, *extra: str, env: dict[str, str] | None = None) -> Any:
    """`a2x-local serve --stdio` as the MCP SDK's client starts it (a desktop agent's way): its parameters."""
    from mcp import StdioServerParameters

    command, *args = cli_command("serve", "--stdio", "--db", str(db_path), *extra)
    return StdioServerParameters(command=command, args=args, env=env or server_env(home), cwd=str(ROOT))


@contextmanager
def running_server(db_path: Path, home: Path, *extra: str, startup_s: float = 120) -> Iterator[str]:
    """`a2x-local serve` in its own process on a loopback port it binds itself (`--port 0`, read back from its
    log); yields its base URL, stops it after."""
    env = server_env(home)
    handle, name = tempfile.mkstemp(prefix="server-", suffix=".log", dir=home)
    os.close(handle)
    log_path = Path(name)
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(cli_command("serve", "--db", str(db_path), "--port", "0", *extra),
                                   env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{bound_port(process, log_path, startup_s)}"
    except BaseException:
        process.kill()
        process.wait(timeout=10)
        raise
    with serving(process, f"{url}/readyz", log_path, startup_s):
        yield url


def decomposing_oracle(oracle: Oracle | None = None) -> Callable[[Request], str]:
    """A model rule that decomposes at ", then" as a model would, and answers the tree searches (and every other
    call type) as the oracle does."""
    oracle = oracle or Oracle(sample_tree(), WANTED)

    def rule(request: Request) -> str:
        if request.context.get("call") in ("decompose", "decompose_sad"):
            parts = request.context["request"].split(", then ")
            return json.dumps({"steps": [{"id": f"s{n}", "task": part, "depends_on": []}
                                         for n, part in enumerate(parts, start=1)]})
        return oracle(request)

    return rule
