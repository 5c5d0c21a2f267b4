"""The fixtures every stage's tests share, loaded by the root conftest through `pytest_plugins`.

One meaning per name:
- ``home``: an empty A2X_HOME for the test (no user configuration leaks in);
- ``db_path``: where the test's registry file goes (not created);
- ``registry_db``: the ten-service registry (`tests.support.registries.SERVICES`) created at ``db_path``;
- ``settings``: settings whose database is ``registry_db``;
- ``cli``: run `a2x-local ARGS --db db_path` in-process, returning exit code and output;
- ``tiny_model_dir`` / ``vllm_engine``: the tiny random Qwen2 model and ONE vLLM engine over it, per session;
- ``fake_model_dir``: a complete model folder (real file formats) that no engine needs to run;
- ``use_engine``: ``use_engine("scripted", lambda config: ScriptedEngine(rule))`` makes `--engine scripted` (or
  `name = "scripted"` in `[engine]`) start that engine for this test, through the real `make_engine`; it returns
  the engine settings of every start, in order;
- ``tiny_engine_args``: the flags (`--engine tiny-vllm --model tiny`) that make a command use ``vllm_engine``.

vLLM inside pytest: the engine runs in-process (`multiprocessing=False`): no engine-core/worker processes to spawn,
~17 s to start on 2 cores instead of ~58 s, and nothing left running if a test run is killed. `VLLM_CPU_KVCACHE_SPACE=1`
(GiB) keeps the KV cache small: the tiny model needs 1 KiB per token, so 1 GiB still holds ~1M tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import NamedTuple

import pytest

from a2x_local.cli import run
from a2x_local.llm.tiny_model import MAX_POSITIONS
from a2x_local.settings import Settings, load_settings
from a2x_local.testing import registered_engine
from tests.support.fake_model import write_fake_model
from tests.support.registries import make_registry

# The tiny model's whole position table: long enough for any build or search prompt the tests make
# (its tokenizer, trained on Python sources, needs ~1 token per 3 characters of English).
TINY_MAX_MODEL_LEN = MAX_POSITIONS


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random-weight Qwen2 chat model (tokenizer with a ChatML template), built once per session (~6 s)."""
    from a2x_local.llm.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny-qwen2")


@pytest.fixture(scope="session")
def vllm_engine(tiny_model_dir: Path) -> Iterator:
    """ONE in-process vLLM engine over the tiny model for the whole session; do not close it in a test.

    Its answers are nonsense that satisfies the constraints: assert that answers parse and flow, never their
    content. ``engine.usage`` accumulates over every test: take ``usage.snapshot()`` and ``usage.since(...)``.
    The `tests.support.forcing.ForceTokens` logits processor is loaded (a no-op unless a request asks for it).
    """
    from a2x_local.llm.config import EngineConfig
    from a2x_local.llm.vllm_engine import VllmEngine
    from tests.support.forcing import ForceTokens

    config = EngineConfig.defaults(dtype="float32", max_model_len=TINY_MAX_MODEL_LEN, enforce_eager=True,
                                   cpu_kvcache_space_gb=1, multiprocessing=False, seed=0)
    engine = VllmEngine(tiny_model_dir, config, model_label="tiny-qwen2",
                        llm_kwargs={"logits_processors": [ForceTokens]})
    yield engine
    engine.close()


@pytest.fixture
def use_engine() -> Iterator[Callable[..., list]]:
    with ExitStack() as registered:
        yield lambda name, make: registered.enter_context(registered_engine(name, make))


@pytest.fixture
def tiny_engine_args(vllm_engine, use_engine) -> list[str]:
    from tests.support.engines import SharedEngine

    use_engine("tiny-vllm", lambda config: SharedEngine(vllm_engine))
    return ["--engine", "tiny-vllm", "--model", "tiny"]


@pytest.fixture
def fake_model_dir(tmp_path: Path) -> Path:
    return write_fake_model(tmp_path / "models" / "Fake-1B-Instruct", shards=2)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty A2X_HOME, and none of the variables that would point a command at other files."""
    monkeypatch.setenv("A2X_HOME", str(tmp_path / "home"))
    for name in ("A2X_DB", "A2X_CONFIG", "A2X_MODELS_DIR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home"


@pytest.fixture
def db_path(tmp_path: Path, home: Path) -> Path:
    return tmp_path / "registry.duckdb"


@pytest.fixture
def registry_db(db_path: Path) -> Path:
    return make_registry(db_path)


@pytest.fixture
def settings(registry_db: Path) -> Settings:
    return load_settings(db=registry_db)


class CliResult(NamedTuple):
    """What a command did; unpacks as ``code, out, err``."""

    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def cli(db_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run `a2x-local ARGS --db db_path` in-process and capture its exit code and output (``db=False``: no --db)."""

    def invoke(*args: object, db: bool = True) -> CliResult:
        capsys.readouterr()
        argv = [str(a) for a in args] + (["--db", str(db_path)] if db else [])
        code = run(argv)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke
