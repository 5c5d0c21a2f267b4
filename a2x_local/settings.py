"""One settings object for every stage: the packaged defaults, then user files, then environment, then flags.

The defaults ship inside the package (`a2x_local/defaults/default.toml`, read with importlib.resources), so an
installed copy has them wherever it lives, and each default is written there once: the stages' typed tables
(`SectionConfig` subclasses) declare types and bounds, never values. Stages read their own table through their
model, so this module never needs to know what a build or a search is. It loads; `config_check` checks the whole
of what it loaded.
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

from a2x_local import long_ints
from a2x_local.errors import InputError, UserError

DEFAULTS_PACKAGE = "a2x_local.defaults"


CONFIG_MAX_BYTES = 1 << 20  # a configuration file is a few kilobytes; a device or a runaway file is refused
# No setting sits more than a few tables deep ([search_presets.NAME], [models."ALIAS"], a gateway server's headers);
# a header of 3,000 dotted parts read fine and then overflowed the merge's recursion.
CONFIG_MAX_DEPTH = 32


def read_toml(path: Path) -> dict[str, Any]:
    """A configuration file, read as every input file is (a regular file, bounded: `jsonfiles.read_bytes`)."""
    from a2x_local.jsonfiles import (  # jsonfiles reads its limits from the settings: imported late
        check_depth,
        read_bytes,
    )

    if not path.exists() and not path.is_symlink():
        raise UserError(f"{path}: configuration file not found",
                        hint="check the path in $A2X_CONFIG (or unset it)")
    data = read_bytes(path, CONFIG_MAX_BYTES, what="configuration",
                      hint="give the configuration file's path ($A2X_CONFIG), not a folder's",
                      size_hint=f"a configuration file holds settings, a few kilobytes; its limit of "
                                f"{CONFIG_MAX_BYTES:,} bytes is fixed (max_file_bytes is for input files)")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})", hint="save the file as UTF-8") from exc
    try:
        config = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML: {exc}",
                        hint="fix the file at the line the message names (TOML: [table] headers, key = value"
                             " lines)") from exc
    except ValueError as exc:      # tomllib's int() of more digits than Python converts (long_ints)
        place = long_ints.toml_place(text) if long_ints.too_long(str(exc)) else ""
        if not place:
            raise UserError(f"{path}: not valid TOML: {exc}", hint="fix the file at the value the message names"
                            ) from exc
        raise UserError(f"{path}: {place}: an integer of more than {long_ints.max_digits():,} digits; no setting "
                        "is that long", code="ConfigError", hint=long_ints.HINT) from exc
    except RecursionError as exc:  # tomllib recurses into nested arrays and inline tables
        raise UserError(f"{path}: arrays or inline tables nested too deeply to read (thousands of levels)",
                        code="TooDeep", hint="no setting nests more than a few levels: fix the value of the key "
                        "whose brackets do not close") from exc
    try:
        check_depth(config, CONFIG_MAX_DEPTH + 1, str(path))      # the file itself is a level there
    except InputError as exc:
        raise UserError(f"{path}: tables or keys nested more than {CONFIG_MAX_DEPTH} levels deep ([a.b.c...] "
                        "headers, dotted keys, arrays or inline tables)", code="TooDeep",
                        hint="no setting nests more than a few levels: fix the header or key with that many "
                        "parts") from exc
    return config


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
    files: tuple[Path, ...] = ()   # the configuration files merged into ``config``, in order

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
        return Settings(self.home, self.db_path, self.models_dir, config, self.files)


def home_dir(environ: Mapping[str, str] | None = None) -> Path:
    """$A2X_HOME, else ~/.a2x-local: where the user's config.toml, registry and logs live."""
    env = os.environ if environ is None else environ
    return resolved(Path(env.get("A2X_HOME") or Path.home() / ".a2x-local").expanduser())


def resolved(path: Path) -> Path:
    """``path`` absolute, links resolved where they lead somewhere: `os.path.realpath`, which leaves a link loop as
    it is (pathlib's resolve() raises a bare RuntimeError there), so whoever opens it reports the loop by name."""
    return Path(os.path.realpath(path))


def folder_like(text: str) -> bool:
    """Whether a path as typed names a folder: it ends in '/' (or '/.', '/..'), which pathlib drops without a word
    (`Path("new.duckdb/")` is `new.duckdb`), so a file would be made where the user named a folder."""
    return text.endswith(("/", os.sep)) or os.path.basename(text) in (".", "..")


def nul_problem(text: str) -> str | None:
    """Why a path as given cannot name a file because it holds a NUL character (no file name can), else None."""
    position = text.find("\0")
    if position < 0:
        return None
    return (f"holds a NUL character (\\u0000) at character {position + 1}; no path can hold one, so nothing was "
            "opened or created")


def check_db_text(text: str, where: str) -> None:
    """The registry path as given (`--db`, `$A2X_DB`, `[paths] db`): a file's path, never one that names a folder."""
    if (problem := nul_problem(text)) is not None:
        raise UserError(f"{where} {text!r} {problem}", code="BadDatabasePath",
                        hint="name the registry file by a path without NUL characters")
    if text and folder_like(text):
        raise UserError(f"{where} {text!r} names a folder (it ends with '/' or a '.' step); the registry database is "
                        "a file, so nothing was created", code="BadDatabasePath",
                        hint="name the file itself: registry.duckdb, or FOLDER/registry.duckdb for one in a folder")


def db_option(text: str) -> Path:
    """`--db` as typed (a typer parser: pathlib would drop a trailing '/' before any check could see it)."""
    check_db_text(text, "--db")
    return Path(text)


_PATH_VARIABLES = ("A2X_HOME", "A2X_CONFIG", "A2X_DB", "A2X_MODELS_DIR")


def _toml_kind(value: Any) -> str:
    """What a TOML value is, in words, for an error that says it is the wrong kind."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "a table"
    return f"a {type(value).__name__} value ({str(value)[:40]})"   # TOML dates and times


def file_sets(data: Mapping[str, Any], keys: list[str]) -> bool:
    """Whether one file's tables give a value at the path ``keys`` (table names, then the key)."""
    for key in keys:
        if not isinstance(data, Mapping) or key not in data:
            return False
        data = data[key]
    return True


def _check_paths(config: Mapping[str, Any], layers: list[tuple[Path, dict[str, Any]]]) -> None:
    """The `[paths]` table of the merged files: a table whose keys are texts that can name a path (no NUL), checked
    before any of them becomes a `Path` (pathlib raises a bare TypeError or ValueError there), each error naming
    the file that set the value, the table and the key."""
    def setter(*keys: str) -> str:
        files = [path for path, data in layers if file_sets(data, list(keys))]
        return f"{files[-1]}: " if files else ""

    paths = config.get("paths", {})
    if not isinstance(paths, Mapping):
        raise UserError(f"{setter('paths')}paths is given a single value ({_toml_kind(paths)}), but paths must be a "
                        "table", code="ConfigError", hint="write [paths] on a line of its own, then its keys below it, "
                        f'one `key = value` a line (db = "registry.duckdb"; {DOCS_PAGE} lists them)')
    for key, what in (("db", "the registry database file"), ("models_dir", "the folder of local model weights")):
        value = paths.get(key)
        if isinstance(value, str) and value and (problem := nul_problem(value)) is None:
            continue
        if not isinstance(value, str):
            problem = f"must be text (the path of {what}, in quotes), not {_toml_kind(value)}"
        elif not value:
            problem = f"is empty; it must name {what}"
        raise UserError(f"{setter('paths', key)}[paths] {key}: {problem}", code="ConfigError",
                        hint=f'write a path in quotes: {key} = "{packaged_default("paths", key)}" (relative paths '
                        f"are resolved against $A2X_HOME; {DOCS_PAGE}, [paths])")


def load_settings(db: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Build the settings for this process; ``db`` is the value of a `--db` flag, if any."""
    env = os.environ if environ is None else environ
    for name in _PATH_VARIABLES:   # an operating system's environment cannot hold a NUL, a mapping given here can
        if (problem := nul_problem(env.get(name) or "")) is not None:
            raise UserError(f"${name} {problem}", code="ConfigError", hint=f"set ${name} to a path without NUL "
                            "characters, or unset it")
    if isinstance(db, str):
        check_db_text(db, "--db")
    config = packaged_defaults()
    home = home_dir(env)
    files = [path for path in (home / "config.toml",) if path.is_file()]
    if env.get("A2X_CONFIG"):
        files.append(Path(env["A2X_CONFIG"]).expanduser())
    layers = [(path, read_toml(path)) for path in files]
    for _path, data in layers:
        config = deep_merge(config, data)
    _check_paths(config, layers)

    paths = config.get("paths", {})
    db_value = db or env.get("A2X_DB") or paths.get("db", "registry.duckdb")
    if isinstance(db_value, str):      # --db arrives as a Path (its own check, cli.options.db_path_option)
        check_db_text(db_value, "$A2X_DB" if not db and env.get("A2X_DB") else "[paths] db" if not db else "--db")
    db_path = Path(db_value).expanduser()
    if not db_path.is_absolute():
        db_path = (Path.cwd() if (db or env.get("A2X_DB")) else home) / db_path
    models_dir = Path(env.get("A2X_MODELS_DIR") or paths["models_dir"]).expanduser()
    if not models_dir.is_absolute():
        models_dir = (Path.cwd() if env.get("A2X_MODELS_DIR") else home) / models_dir
    return Settings(home=home, db_path=_database_path(db_path), models_dir=resolved(models_dir), config=config,
                    files=tuple(files))


def _database_path(path: Path) -> Path:
    """The registry path, links resolved (its log and lock files are then beside the file itself); a link to nothing,
    out of its own folder or into a loop stays the link, so opening the registry refuses it (`db.check_db_path`)
    instead of creating or writing a database wherever the link points."""
    target = resolved(path)
    folder = resolved(path.parent)
    if path.is_symlink() and (not target.exists() or target.parent != folder):
        return folder / path.name
    return target


def validation_problems(exc: ValidationError, root: str = "value") -> str:
    """A pydantic error as one readable line: `field: message; field: message`."""
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or root}: {err['msg']}" for err in exc.errors())


def config_table(config: Mapping[str, Any], dotted: str) -> dict[str, Any]:
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
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "section" in cls.__dict__:   # a class that names its own table (not one that only refines another)
            _SECTIONS[cls.section] = cls

    @classmethod
    def load(cls, config: Mapping[str, Any], **overrides: Any) -> Self:
        """The table of ``config`` (merged configuration tables) with ``overrides`` (None = not given)."""
        values = deep_merge(config_table(config, cls.section),
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


# --- the table models, as the stages declare them ---------------------------------------------------------------------

_SECTIONS: dict[str, type[SectionConfig]] = {}       # table name -> its model, filled as stages declare them
_NAMED_TABLES: dict[str, type[BaseModel]] = {}       # tables of entries named by the user ([models."NAME"])
DOCS_PAGE = "docs/configuration.md"


def table_models() -> dict[str, type[SectionConfig]]:
    """Every table's model by table name ("engine.openai"), as the stages imported so far declared them."""
    return dict(_SECTIONS)


def named_table_models() -> dict[str, type[BaseModel]]:
    """The model of one entry of each table whose entries the user names (``models`` -> `ModelAlias`)."""
    return dict(_NAMED_TABLES)


def register_named_table(name: str, model: type[BaseModel]) -> None:
    """Declare a top-level table whose entries the user names (``[models."my-model"]``), each read by ``model``."""
    _NAMED_TABLES[name] = model
