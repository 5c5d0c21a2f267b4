"""One settings object for every stage: configs/default.toml, then user files, then environment, then flags.

Stages keep their own typed config models and read their section from here, so this module never needs to know
what a build or a search is.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from a2x_local.errors import UserError

ConfigModel = TypeVar("ConfigModel", bound=BaseModel)

PROJECT_ROOT = Path(__file__).resolve().parent.parent


def config_dir() -> Path:
    """Folder holding default.toml and models.toml ($A2X_CONFIG_DIR, else the project's configs/)."""
    return Path(os.environ.get("A2X_CONFIG_DIR") or PROJECT_ROOT / "configs")


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError as exc:
        raise UserError(f"{path}: configuration file not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from exc


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; any other value in ``override`` replaces the one in ``base``."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


@dataclass(frozen=True)
class Settings:
    """Resolved paths plus the merged configuration tables."""

    home: Path
    db_path: Path
    models_dir: Path
    config: dict[str, Any] = field(default_factory=dict)

    def section(self, name: str) -> dict[str, Any]:
        """A copy of one configuration table (empty when absent)."""
        return copy.deepcopy(self.config.get(name, {}))

    @property
    def lock_timeout_s(self) -> float:
        """Seconds to wait for another process that holds the database ([registry] lock_timeout_s)."""
        return float(self.config.get("registry", {}).get("lock_timeout_s", 30))

    def with_overrides(self, section: str, **values: Any) -> Settings:
        """The same settings with some keys of one table replaced; ``None`` values are ignored."""
        changes = {key: value for key, value in values.items() if value is not None}
        config = deep_merge(self.config, {section: changes})
        return Settings(self.home, self.db_path, self.models_dir, config)


def load_settings(db: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Build the settings for this process; ``db`` is the value of a `--db` flag, if any."""
    env = os.environ if environ is None else environ
    config = read_toml(config_dir() / "default.toml")
    home = Path(env.get("A2X_HOME") or Path.home() / ".a2x-local").expanduser().resolve()
    user_file = home / "config.toml"
    if user_file.is_file():
        config = deep_merge(config, read_toml(user_file))
    if env.get("A2X_CONFIG"):
        config = deep_merge(config, read_toml(Path(env["A2X_CONFIG"]).expanduser()))

    paths = config.get("paths", {})
    db_value = db or env.get("A2X_DB") or paths.get("db", "registry.duckdb")
    db_path = Path(db_value).expanduser()
    if not db_path.is_absolute():
        db_path = (Path.cwd() if (db or env.get("A2X_DB")) else home) / db_path
    models_value = env.get("A2X_MODELS_DIR") or paths.get("models_dir")
    models_dir = Path(models_value).expanduser() if models_value else PROJECT_ROOT / "models"
    if not models_dir.is_absolute():
        models_dir = PROJECT_ROOT / models_dir
    return Settings(home=home, db_path=db_path.resolve(), models_dir=models_dir.resolve(), config=config)


def validation_problems(exc: ValidationError, root: str = "value") -> str:
    """A pydantic error as one readable line: `field: message; field: message`."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or root}: {err['msg']}" for err in exc.errors())


def section_config(settings: Settings, name: str, model: type[ConfigModel], **overrides: Any) -> ConfigModel:
    """One configuration table as a stage's typed model, with flag ``overrides`` (None = not given).

    Every stage loads its table this way, so a bad key or value is one clear error naming the table.
    """
    values = settings.section(name)
    values.update({key: value for key, value in overrides.items() if value is not None})
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise UserError(f"invalid [{name}] configuration: {validation_problems(exc, name)}",
                        hint=f"check the [{name}] table of configs/default.toml, your config.toml and the flags"
                        ) from exc
