"""One settings object for every stage: the packaged defaults, then user files, then environment, then flags.

The defaults ship inside the package (`a2x_local/defaults/default.toml`, read with importlib.resources), so an
installed copy has them wherever it lives, and each default is written there once: the stages' typed tables
(`SectionConfig` subclasses) declare types and bounds, never values. Stages read their own table through their
model, so this module never needs to know what a build or a search is.
"""

from __future__ import annotations

import copy
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from a2x_local.errors import UserError

DEFAULTS_PACKAGE = "a2x_local.defaults"


def read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError as exc:
        raise UserError(f"{path}: configuration file not found") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}") from exc
    except OSError as exc:
        raise UserError(f"{path}: cannot read the configuration file: {exc.strerror or exc}") from exc


@cache
def _packaged(name: str) -> dict[str, Any]:
    return tomllib.loads((resources.files(DEFAULTS_PACKAGE) / name).read_text(encoding="utf-8"))


def packaged_file(name: str) -> dict[str, Any]:
    """A TOML file shipped in `a2x_local/defaults/` (`default.toml`, `models.toml`), as a fresh copy."""
    return copy.deepcopy(_packaged(name))


def packaged_defaults() -> dict[str, Any]:
    """Every default of every stage: the packaged default.toml."""
    return packaged_file("default.toml")


def packaged_default(table: str, key: str) -> Any:
    """One packaged default (for the few core functions a library may call without settings, which still take
    their default from default.toml rather than writing it again)."""
    return copy.deepcopy(_packaged("default.toml")[table][key])


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
        return float(self.config["registry"]["lock_timeout_s"])

    def with_overrides(self, section: str, **values: Any) -> Settings:
        """The same settings with some keys of one table replaced; ``None`` values are ignored."""
        changes = {key: value for key, value in values.items() if value is not None}
        config = deep_merge(self.config, {section: changes})
        return Settings(self.home, self.db_path, self.models_dir, config)


def home_dir(environ: Mapping[str, str] | None = None) -> Path:
    """$A2X_HOME, else ~/.a2x-local: where the user's config.toml, registry and logs live."""
    env = os.environ if environ is None else environ
    return Path(env.get("A2X_HOME") or Path.home() / ".a2x-local").expanduser().resolve()


def load_settings(db: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Build the settings for this process; ``db`` is the value of a `--db` flag, if any."""
    env = os.environ if environ is None else environ
    config = packaged_defaults()
    home = home_dir(env)
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
    models_dir = Path(env.get("A2X_MODELS_DIR") or paths["models_dir"]).expanduser()
    if not models_dir.is_absolute():
        models_dir = (Path.cwd() if env.get("A2X_MODELS_DIR") else home) / models_dir
    return Settings(home=home, db_path=db_path.resolve(), models_dir=models_dir.resolve(), config=config)


def validation_problems(exc: ValidationError, root: str = "value") -> str:
    """A pydantic error as one readable line: `field: message; field: message`."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or root}: {err['msg']}" for err in exc.errors())


def _table(config: Mapping[str, Any], dotted: str) -> dict[str, Any]:
    table: Any = config
    for part in dotted.split("."):
        table = table.get(part, {}) if isinstance(table, Mapping) else {}
    return copy.deepcopy(dict(table)) if isinstance(table, Mapping) else {}


class SectionConfig(BaseModel):
    """A stage's typed configuration table. Subclasses name their ``section`` ("build", "engine.openai") and
    declare types and bounds only: every default value lives once, in the packaged default.toml (a field that may
    be absent defaults to None and is documented there as a comment). Unknown keys are refused.
    """

    model_config = ConfigDict(extra="forbid")
    section: ClassVar[str]

    @classmethod
    def load(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """The table of ``config`` (merged configuration tables) with ``overrides`` (None = not given)."""
        values = deep_merge(_table(config, cls.section),
                            {key: value for key, value in overrides.items() if value is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise UserError(f"invalid [{cls.section}] configuration: {validation_problems(exc, cls.section)}",
                            hint=f"check the [{cls.section}] table of your config.toml (or $A2X_CONFIG) and the "
                            "flags; `docs/configuration.md` lists every key") from exc

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> Self:
        """This table as the settings resolve it (defaults, user files, environment), with flag ``overrides``."""
        return cls.load(settings.config, **overrides)

    @classmethod
    def defaults(cls, **overrides: Any) -> Self:
        """The packaged defaults of this table, with ``overrides``: for library callers and tests."""
        return cls.load(_packaged("default.toml"), **overrides)
