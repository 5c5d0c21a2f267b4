"""One settings object for every stage: the packaged defaults, then user files, then environment, then flags.

The defaults ship inside the package (`a2x_local/defaults/default.toml`, read with importlib.resources), so an
installed copy has them wherever it lives, and each default is written there once: the stages' typed tables
(`SectionConfig` subclasses) declare types and bounds, never values. Stages read their own table through their
model, so this module never needs to know what a build or a search is.
"""

from __future__ import annotations

import copy
import difflib
import os
import tomllib
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal, Self, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError

from a2x_local import long_ints
from a2x_local.errors import UserError

DEFAULTS_PACKAGE = "a2x_local.defaults"


CONFIG_MAX_BYTES = 1 << 20  # a configuration file is a few kilobytes; a device or a runaway file is refused


def read_toml(path: Path) -> dict[str, Any]:
    """A configuration file, read as every input file is (a regular file, bounded: `jsonfiles.read_bytes`)."""
    from a2x_local.jsonfiles import read_bytes  # jsonfiles reads its limits from the settings: imported late

    if not path.exists() and not path.is_symlink():
        raise UserError(f"{path}: configuration file not found",
                        hint="check the path in $A2X_CONFIG (or unset it)")
    data = read_bytes(path, CONFIG_MAX_BYTES, what="configuration",
                      hint="give the configuration file's path ($A2X_CONFIG), not a folder's")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text (byte {exc.start})", hint="save the file as UTF-8") from exc
    try:
        return tomllib.loads(text)
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


def _check_paths(config: Mapping[str, Any], layers: list[tuple[Path, dict[str, Any]]]) -> None:
    """The `[paths]` table of the merged files: a table whose keys are texts that can name a path (no NUL), checked
    before any of them becomes a `Path` (pathlib raises a bare TypeError or ValueError there), each error naming
    the file that set the value, the table and the key."""
    def setter(*keys: str) -> str:
        files = [path for path, data in layers if _sets(data, list(keys))]
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
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if "section" in cls.__dict__:   # a class that names its own table (not one that only refines another)
            _SECTIONS[cls.section] = cls

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


# --- the whole configuration, checked at start ----------------------------------------------------------------------

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


@dataclass(frozen=True)
class _Problem:
    message: str
    wrong: str = ""                  # the misspelt name, and the valid names in its place
    valid: tuple[str, ...] = ()
    table: bool = False              # a table name ([serch]) rather than a key
    note: str = ""                   # what replaced a key that an earlier version read

    def suggestion(self) -> str:
        """`[serch]: did you mean [search]?`, or the valid names when none is close."""
        if self.note:
            return f"{self.wrong}: {self.note}"
        name = (lambda text: f"[{text}]") if self.table else str
        close = difflib.get_close_matches(self.wrong, self.valid, n=1, cutoff=0.6)
        if close:
            return f"{name(self.wrong)}: did you mean {name(close[0])}?"
        listed = ", ".join(map(name, self.valid[:12])) + (" ..." if len(self.valid) > 12 else "")
        return f"{name(self.wrong)}: valid here: {listed}"


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``OpenAIConfig``, ``OpenAIConfig | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (Union, types.UnionType):
        return next((model for arg in get_args(annotation) if (model := _model_in(arg))), None)
    return None


def _entry_model(annotation: Any) -> type[BaseModel] | None:
    """The model of each entry of a ``dict[str, Model]`` annotation (a table of named entries)."""
    args = get_args(annotation)
    return _model_in(args[1]) if get_origin(annotation) is dict and len(args) == 2 else None


# Keys earlier versions read, with what took their place: a config written for them gets told what to write now.
RETIRED_KEYS = {
    ("serve", "max_node_services"): "replaced by page_size (services per answer, default 20) and max_page (the most"
                                    " a client may ask for, 200): browse answers are paged now",
}


def _unknown_keys(path: Path, where: str, table: Mapping[str, Any], model: type[BaseModel]) -> list[_Problem]:
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    problems = []
    for key, value in table.items():
        if (where, key) in RETIRED_KEYS:
            problems.append(_Problem(f"{path}: [{where}] {key} is no longer read", key,
                                     note=RETIRED_KEYS[where, key]))
        elif key not in fields:
            problems.append(_Problem(f"{path}: unknown key '{key}' in [{where}]", key, tuple(fields)))
        elif isinstance(value, Mapping) and (inner := _model_in(fields[key].annotation)):
            problems += _unknown_keys(path, f"{where}.{key}", value, inner)
        elif isinstance(value, Mapping) and (entry := _entry_model(fields[key].annotation)):
            problems += [problem for name, item in value.items() if isinstance(item, Mapping)
                         for problem in _unknown_keys(path, f'{where}.{key}."{name}"', item, entry)]
    return problems


def _unknown_names(path: Path, data: Mapping[str, Any]) -> list[_Problem]:
    """Tables and keys of one configuration file that no stage reads."""
    defaults = _packaged("default.toml")
    tables = sorted({*defaults, *(name.split(".")[0] for name in _SECTIONS), *_NAMED_TABLES})
    problems = []
    for name, table in data.items():
        if name not in tables:
            problems.append(_Problem(f"{path}: unknown table [{name}]", name, tuple(tables), table=True))
        elif not isinstance(table, Mapping):
            problems.append(_Problem(f"{path}: {name} is given a single value, but {name} must be a table", name,
                                     note=f"write [{name}] on a line of its own, then its keys below "
                                     "it, one `key = value` a line"))
        elif name in _SECTIONS:
            problems += _unknown_keys(path, name, table, _SECTIONS[name])
        elif name in _NAMED_TABLES:
            problems += [problem for entry, item in table.items() if isinstance(item, Mapping)
                         for problem in _unknown_keys(path, f'{name}."{entry}"', item, _NAMED_TABLES[name])]
        else:   # a table of plain keys that no model reads ([paths]): its keys are those of default.toml
            known = tuple(defaults.get(name, {}))
            problems += [_Problem(f"{path}: unknown key '{key}' in [{name}]", key, known)
                         for key in table if key not in known]
    return problems


def _sets(data: Mapping[str, Any], keys: list[str]) -> bool:
    """Whether one file's tables give a value at the path ``keys`` (table names, then the key)."""
    for key in keys:
        if not isinstance(data, Mapping) or key not in data:
            return False
        data = data[key]
    return True


def setting_file(settings: Settings, *keys: str) -> Path | None:
    """The configuration file whose value of ``keys`` (table names, then the key) is in force: the last of the
    settings' files that sets it (None: the packaged default, or a value no file gave). For a check a stage makes
    once it knows what a value may name (the server's methods, registered by plug-ins), so its error names the file."""
    setters = [path for path in settings.files if _sets(read_toml(path), list(keys))]
    return setters[-1] if setters else None


def _bad_values(settings: Settings) -> list[_Problem]:
    """Values of every stage's table that its model refuses, each named by the file that set it."""
    layers = [(path, read_toml(path)) for path in settings.files]
    problems = []
    for section, model in sorted(_SECTIONS.items()):
        if "." in section and section.rpartition(".")[0] in _SECTIONS:
            continue   # checked as part of the table it is nested in ([engine.openai] within [engine])
        try:
            model.model_validate(_table(settings.config, section))
        except ValidationError as exc:
            for error in exc.errors():
                keys, rest = _key_of(_table(settings.config, section), error["loc"])
                if keys:
                    setters = [path for path, data in layers if _sets(data, [*section.split("."), *keys])][-1:]
                else:      # a check of the whole table (default_k <= max_k): every file that sets some of it
                    setters = [path for path, data in layers if _sets(data, section.split("."))]
                where = f"{', '.join(map(str, setters))}: " if setters else ""
                table = ".".join([section, *keys[:-1]])
                named = f"[{table}] {keys[-1]}{rest}" if keys else f"[{table}] (the table as a whole)"
                problems.append(_Problem(f"{where}{named}: {error['msg']}"))
    return problems


def _key_of(table: Mapping[str, Any], loc: tuple[int | str, ...]) -> tuple[list[str], str]:
    """The tables and key a pydantic error location names in the configuration, and what follows the key (a list
    index, as "[0]"); the names pydantic gives the members of a union ("literal['auto']", "bool") are left out."""
    keys: list[str] = []
    node: Any = table
    for position, part in enumerate(loc):
        if isinstance(node, Mapping) and str(part) in node:
            keys.append(str(part))
            node = node[str(part)]
            continue
        rest = "".join(f"[{item}]" for item in loc[position:] if isinstance(item, int))
        return (keys or [str(part)]), rest
    return keys, ""


def _accepts(annotation: Any) -> tuple[set[type], set[Any]]:
    """The scalar types an annotation admits and the values its `Literal`s list (``Literal["auto"] | int`` ->
    ({int}, {"auto"})); constraints (`Annotated`) are looked through."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType) or hasattr(annotation, "__metadata__"):
        kinds: set[type] = set()
        values: set[Any] = set()
        for arg in get_args(annotation)[:1] if hasattr(annotation, "__metadata__") else get_args(annotation):
            more_kinds, more_values = _accepts(arg)
            kinds |= more_kinds
            values |= more_values
        return kinds, values
    if origin is Literal:
        return set(), set(get_args(annotation))
    return ({annotation} if isinstance(annotation, type) else set()), set()


def _number_problem(value: Any, annotation: Any) -> str | None:
    """Why a value written in a configuration file cannot stand for a number, else None. A number field takes a TOML
    number: an integer field an integer, a float field an integer or a float; never text ("50") or a boolean (true
    read as 1), which pydantic would convert. Only files are held to this: a flag or `-o key=value` arrives as text
    and is converted by its options model before it reaches a table."""
    kinds, literals = _accepts(annotation)
    if not kinds & {int, float}:
        return None                                   # not a number field: its model checks it
    if isinstance(value, bool) and bool not in kinds and value not in literals:
        return f"the boolean {str(value).lower()}, where a number belongs"
    if isinstance(value, str) and str not in kinds and value not in literals:
        other = f" or {', '.join(repr(v) for v in sorted(map(str, literals)))}" if literals else ""
        return f"the text {value[:40]!r}, where a number belongs: write it without quotes{other}"
    if isinstance(value, float) and float not in kinds:
        return f"{value!r}, where a whole number belongs: write it without a decimal point"
    return None


def _loose_numbers(path: Path, where: str, table: Mapping[str, Any], model: type[BaseModel]) -> list[str]:
    """Numbers of one file's table (nested tables and named entries included) written as text or booleans."""
    fields = {info.alias or name: info for name, info in model.model_fields.items()}
    problems = []
    for key, value in table.items():
        info = fields.get(key)
        if info is None:
            continue
        annotation = info.annotation
        if isinstance(value, Mapping) and (inner := _model_in(annotation)):
            problems += _loose_numbers(path, f"{where}.{key}", value, inner)
        elif isinstance(value, Mapping) and (entry := _entry_model(annotation)):
            problems += [problem for name, item in value.items() if isinstance(item, Mapping)
                         for problem in _loose_numbers(path, f'{where}.{key}."{name}"', item, entry)]
        elif isinstance(value, list) and (items := [arg for arg in get_args(annotation) if get_origin(arg) is list]
                                          or ([annotation] if get_origin(annotation) is list else [])):
            item_type = get_args(items[0])[0] if get_args(items[0]) else Any
            problems += [f"{path}: [{where}] {key}[{index}]: {problem}" for index, item in enumerate(value)
                         if (problem := _number_problem(item, item_type))]
        elif (problem := _number_problem(value, annotation)) is not None:
            problems.append(f"{path}: [{where}] {key}: {problem}")
    return problems


def _typed_numbers(path: Path, data: Mapping[str, Any]) -> list[str]:
    """Every number of one configuration file that is written as text or as a boolean, named by file and key."""
    problems = []
    for name, table in data.items():
        if not isinstance(table, Mapping):
            continue
        if name in _SECTIONS:
            problems += _loose_numbers(path, name, table, _SECTIONS[name])
        elif name in _NAMED_TABLES:
            problems += [problem for entry, item in table.items() if isinstance(item, Mapping)
                         for problem in _loose_numbers(path, f'{name}."{entry}"', item, _NAMED_TABLES[name])]
    return problems


def check_config(settings: Settings) -> None:
    """Check every table and key of the configuration files at once, whichever command runs: a misspelt table or
    key (`[serch]`, `leaf_max_servicez`) is an error naming the file, the table and the key, with the closest valid
    name in the hint; then every stage's table is validated. Call it once every stage's config model is imported
    (the CLI does, at start): a table whose model was never imported would read as unknown."""
    problems = [problem for path, data in ((path, read_toml(path)) for path in settings.files)
                for problem in _unknown_names(path, data)]
    if problems:
        raise UserError("; ".join(problem.message for problem in problems), code="ConfigError",
                        hint="; ".join(problem.suggestion() for problem in problems)
                        + f" ({DOCS_PAGE} lists every table and key)")
    loose = [problem for path in settings.files for problem in _typed_numbers(path, read_toml(path))]
    if loose:
        raise UserError("invalid configuration: " + "; ".join(loose), code="ConfigError",
                        hint="fix the value in the file named: numbers are TOML numbers, without quotes (max_k = 50, "
                        f"lock_timeout_s = 30.5), booleans true or false ({DOCS_PAGE} lists every key and its "
                        "allowed values)")
    problems = _bad_values(settings)
    if problems:
        raise UserError("invalid configuration: " + "; ".join(problem.message for problem in problems),
                        code="ConfigError", hint=f"fix the value in the file named ({DOCS_PAGE} lists every key"
                        " and its allowed values)")
