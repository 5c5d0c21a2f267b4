"""Session-wide fixtures: the tiny random Qwen2 model and ONE vLLM engine serving it, shared by every stage's tests.

vLLM inside pytest: the engine runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, what the engine's
``multiprocessing=False`` sets): no engine-core/worker processes to spawn, ~17 s to start on 2 cores instead of
~58 s, and nothing left running if a test run is killed. `VLLM_CPU_KVCACHE_SPACE=1` (GiB) keeps the KV cache small:
the tiny model needs 1 KiB per token, so 1 GiB still holds ~1M tokens. `VLLM_CPU_OMP_THREADS_BIND=nobind`: vLLM
otherwise pins its OpenMP threads (here: the pytest process's) to cores, and pinned threads that share 2 cores with
the server test's subprocess or a parallel job ran 5-10x slower (single requests 0.15 s -> 1.5 s).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from a2x_local.cli import run
from a2x_local.llm.tiny_model import MAX_POSITIONS

for _key, _value in {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
                     "DO_NOT_TRACK": "1", "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "WARNING",
                     "VLLM_CPU_OMP_THREADS_BIND": "nobind"}.items():
    os.environ.setdefault(_key, _value)

# No test may read or write the user's real registry or configuration: every default path points into a
# throw-away home (tests that need their own set A2X_HOME / A2X_DB themselves).
os.environ["A2X_HOME"] = tempfile.mkdtemp(prefix="a2x-test-home-")
for _key in ("A2X_DB", "A2X_CONFIG", "A2X_MODELS_DIR", "A2X_CONFIG_DIR"):
    os.environ.pop(_key, None)

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


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


@pytest.fixture
def db_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("A2X_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("A2X_DB", raising=False)
    return tmp_path / "registry.duckdb"


@pytest.fixture
def cli(db_path: Path, capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run `a2x-local ARGS --db db_path` in-process and capture its exit code and output."""

    def invoke(*args: str, db: bool = True) -> CliResult:
        capsys.readouterr()
        argv = [str(a) for a in args] + (["--db", str(db_path)] if db else [])
        code = run(argv)
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke
