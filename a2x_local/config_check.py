"""The whole configuration, checked once at start whichever command runs: a misspelt table or key, a number written
as text or a value a table's model refuses is named, with the file that set it, before any work. `settings` loads;
this reads what it loaded."""

from __future__ import annotations

import difflib
import types
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from a2x_local.errors import UserError
from a2x_local.settings import (
    DOCS_PAGE,
    Settings,
    config_table,
    file_sets,
    named_table_models,
    packaged_defaults,
    read_toml,
    table_models,
)


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
    defaults, sections, named = packaged_defaults(), table_models(), named_table_models()
    tables = sorted({*defaults, *(name.split(".")[0] for name in sections), *named})
    problems = []
    for name, table in data.items():
        if name not in tables:
            problems.append(_Problem(f"{path}: unknown table [{name}]", name, tuple(tables), table=True))
        elif not isinstance(table, Mapping):
            problems.append(_Problem(f"{path}: {name} is given a single value, but {name} must be a table", name,
                                     note=f"write [{name}] on a line of its own, then its keys below "
                                     "it, one `key = value` a line"))
        elif name in sections:
            problems += _unknown_keys(path, name, table, sections[name])
        elif name in named:
            problems += [problem for entry, item in table.items() if isinstance(item, Mapping)
                         for problem in _unknown_keys(path, f'{name}."{entry}"', item, named[name])]
        else:   # a table of plain keys that no model reads ([paths]): its keys are those of default.toml
            known = tuple(defaults.get(name, {}))
            problems += [_Problem(f"{path}: unknown key '{key}' in [{name}]", key, known)
                         for key in table if key not in known]
    return problems


def setting_file(settings: Settings, *keys: str) -> Path | None:
    """The configuration file whose value of ``keys`` (table names, then the key) is in force: the last of the
    settings' files that sets it (None: the packaged default, or a value no file gave). For a check a stage makes
    once it knows what a value may name (the server's methods, registered by plug-ins), so its error names the file."""
    setters = [path for path in settings.files if file_sets(read_toml(path), list(keys))]
    return setters[-1] if setters else None


def _bad_values(settings: Settings) -> list[_Problem]:
    """Values of every stage's table that its model refuses, each named by the file that set it."""
    layers = [(path, read_toml(path)) for path in settings.files]
    sections = table_models()
    problems = []
    for section, model in sorted(sections.items()):
        if "." in section and section.rpartition(".")[0] in sections:
            continue   # checked as part of the table it is nested in ([engine.openai] within [engine])
        try:
            model.model_validate(config_table(settings.config, section))
        except ValidationError as exc:
            for error in exc.errors():
                keys, rest = _key_of(config_table(settings.config, section), error["loc"])
                if keys:
                    setters = [path for path, data in layers if file_sets(data, [*section.split("."), *keys])][-1:]
                else:      # a check of the whole table (default_k <= max_k): every file that sets some of it
                    setters = [path for path, data in layers if file_sets(data, section.split("."))]
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
    sections, named = table_models(), named_table_models()
    problems = []
    for name, table in data.items():
        if not isinstance(table, Mapping):
            continue
        if name in sections:
            problems += _loose_numbers(path, name, table, sections[name])
        elif name in named:
            problems += [problem for entry, item in table.items() if isinstance(item, Mapping)
                         for problem in _loose_numbers(path, f'{name}."{entry}"', item, named[name])]
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
