"""Operator settings are bounded (issue 32, finding 12): every number of every table has a documented upper bound
(default.toml states it beside the key), booleans are true or false only, and a writer waiting for the registry
lock says so every few seconds, naming the holder. Before: `max_k = default_k = 10**12` answered every service in
one page, `lock_timeout_s = inf` waited forever with no word, `max_file_bytes = 1e29` was accepted and the text
"yes" was taken for true."""

from __future__ import annotations

import logging
import math
import re
import subprocess
import time
import tomllib
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import pytest
from pydantic import BaseModel

from a2x_local.config_check import _entry_model, _model_in, check_config
from a2x_local.errors import UserError
from a2x_local.locks import RegistryBusyError, RegistryLock
from a2x_local.settings import _NAMED_TABLES, _SECTIONS, load_settings, packaged_file
from tests.support.paths import ROOT, SAMPLE
from tests.support.processes import cli_command, python_command, tree_env
from tests.test_settings import _section_configs

DEFAULT_TOML = ROOT / "a2x_local" / "defaults" / "default.toml"


def _scalars(annotation: Any) -> set[Any]:
    """The scalar types an annotation admits (``int | None`` -> {int, NoneType})."""
    if get_origin(annotation) in (Union, types.UnionType):
        return {kind for arg in get_args(annotation) for kind in _scalars(arg)}
    if get_origin(annotation) is Literal:
        return {type(value) for value in get_args(annotation)}
    if get_origin(annotation) is not None and hasattr(annotation, "__metadata__"):
        return _scalars(get_args(annotation)[0])
    return {annotation}


def _constraints(annotation: Any) -> list[Any]:
    """The constraints an `Annotated[...]` carries (a pydantic `Field(...)` holds its own list)."""
    found = []
    for item in getattr(annotation, "__metadata__", ()):
        found += list(getattr(item, "metadata", [item]))
    return found


def _bounds(info: Any) -> tuple[float | None, float | None]:
    """(lower, upper) of a field, from its own metadata and that of the types its annotation admits."""
    metadata = list(info.metadata)
    stack = [info.annotation]
    while stack:
        annotation = stack.pop()
        metadata += _constraints(annotation)
        if get_origin(annotation) is not list:     # a list's items are checked on their own
            stack += list(get_args(annotation))
    lower = next((getattr(m, "ge", None) if isinstance(m, annotated_types.Ge) else m.gt for m in metadata
                  if isinstance(m, annotated_types.Ge | annotated_types.Gt)), None)
    upper = next((getattr(m, "le", None) if isinstance(m, annotated_types.Le) else m.lt for m in metadata
                  if isinstance(m, annotated_types.Le | annotated_types.Lt)), None)
    return lower, upper


def _fields(model: type[BaseModel], where: str) -> list[tuple[str, Any]]:
    """Every field of a table's model, nested tables and named entries included, as ("table.key", FieldInfo)."""
    found = []
    for name, info in model.model_fields.items():
        inner = _model_in(info.annotation) or _entry_model(info.annotation)
        if inner is not None:
            found += _fields(inner, f"{where}.{name}")
        else:
            found.append((f"{where}.{name}", info))
    return found


def every_setting() -> list[tuple[str, Any]]:
    _section_configs()      # import every stage, so every table is registered
    found = []
    for section, model in sorted(_SECTIONS.items()):
        if "." in section and section.rpartition(".")[0] in _SECTIONS:
            continue        # nested in its parent's model
        found += _fields(model, section)
    for name, model in sorted(_NAMED_TABLES.items()):
        if name != "search_presets":      # a preset's values are checked as [search] values when it is used
            found += _fields(model, f'{name}."NAME"')
    return found


def test_every_number_has_an_upper_bound_and_every_boolean_is_strict():
    unbounded, lax = [], []
    for key, info in every_setting():
        kinds = _scalars(info.annotation)
        if kinds & {int, float} and _bounds(info)[1] is None:
            unbounded.append(key)
        for kind in kinds:
            if get_origin(kind) is list and _scalars(get_args(kind)[0]) & {int, float} and \
                    not any(isinstance(m, annotated_types.Le | annotated_types.Lt)
                            for m in _constraints(get_args(kind)[0])):
                unbounded.append(f"{key}[]")
        if bool in kinds and not any(getattr(m, "strict", False) for m in _all_metadata(info)):
            lax.append(key)
    assert len(every_setting()) > 150
    assert unbounded == [], f"numbers without an upper bound: {unbounded}"
    assert lax == [], f"booleans that take 'yes' or 1 for true: {lax}"


def _all_metadata(info: Any) -> list[Any]:
    found, stack = list(info.metadata), [info.annotation]
    while stack:
        annotation = stack.pop()
        found += _constraints(annotation)
        stack += list(get_args(annotation))
    return found


def _comments_above(lines: list[str], index: int) -> str:
    block = []
    for line in reversed(lines[:index]):
        if not line.startswith("#"):
            break
        block.append(line)
    return " ".join(reversed(block))


def test_default_toml_states_each_number_s_bounds_beside_it():
    lines = DEFAULT_TOML.read_text(encoding="utf-8").splitlines()
    table, missing, wrong = "", [], []
    stated: dict[str, str] = {}
    for index, line in enumerate(lines):
        if line.startswith("["):
            table = line.strip("[]")
        elif match := re.match(r"^([a-z_0-9]+) = ", line):
            stated[f"{table}.{match.group(1)}"] = _comments_above(lines, index)
    for key, info in every_setting():
        lower, upper = _bounds(info)
        if upper is None or key not in stated:
            continue
        found = re.search(r"Bounds: (?:above )?(-?[\d,.]+) to (-?[\d,.]+)", stated[key])
        if found is None:
            missing.append(key)
        elif (float(found.group(1).replace(",", "")), float(found.group(2).replace(",", ""))) != (lower, upper):
            wrong.append(f"{key}: says {found.group(0)}, the model {lower} to {upper}")
    assert missing == [] and wrong == [], f"no 'Bounds: LOW to HIGH' line: {missing}; wrong: {wrong}"


def test_the_packaged_defaults_lie_within_their_bounds():
    defaults = packaged_file("default.toml")
    for section, model in _SECTIONS.items():
        if "." not in section:
            model.defaults()        # raises on a default outside its bounds
    assert defaults["serve"]["max_k"] <= 10_000


@pytest.mark.parametrize(("table", "values", "named"), [
    ("serve", {"max_k": 10**12, "default_k": 10**12}, "max_k"),
    ("serve", {"default_k": 500, "max_k": 100}, "default_k"),
    ("serve", {"page_size": 300, "max_page": 200}, "page_size"),
    ("registry", {"lock_timeout_s": math.inf}, "lock_timeout_s"),
    ("registry", {"lock_timeout_s": 1e300}, "lock_timeout_s"),
    ("registry", {"lock_timeout_s": math.nan}, "lock_timeout_s"),
    ("registry", {"max_file_bytes": 1e29}, "max_file_bytes"),
    ("registry", {"max_file_bytes": 10**29}, "max_file_bytes"),
    ("registry", {"allow_lookalikes": "yes"}, "allow_lookalikes"),
    ("cache", {"enabled": 1}, "enabled"),
    ("serve", {"request_timeout_s": 1e12}, "request_timeout_s"),
    ("compose", {"probe": "false"}, "probe"),
])
def test_out_of_bounds_settings_are_refused_naming_the_key(table: str, values: dict, named: str):
    model = _SECTIONS[table]
    with pytest.raises(UserError) as caught:
        model.defaults(**values)
    assert named in caught.value.message, caught.value.message


def test_a_config_file_with_an_unbounded_number_fails_every_command(tmp_path: Path):
    config = tmp_path / "big.toml"
    config.write_text("[serve]\nmax_k = 1000000000000\ndefault_k = 1000000000000\n[registry]\nlock_timeout_s = inf\n")
    done = subprocess.run(cli_command("stats", "--db", str(tmp_path / "r.duckdb")), capture_output=True, text=True,
                          env=tree_env(A2X_CONFIG=str(config), A2X_HOME=str(tmp_path / "home")), timeout=300)
    assert done.returncode == 1, done.stderr
    assert "max_k" in done.stderr and "lock_timeout_s" in done.stderr and str(config) in done.stderr, done.stderr
    assert tomllib.loads(config.read_text())["registry"]["lock_timeout_s"] == math.inf



# --- numbers in files are TOML numbers (the audit after issue 32) ---------------------------------------------------

def checked(tmp_path: Path, text: str) -> str | None:
    """What check_config says of a configuration file holding ``text`` (None: accepted)."""
    _section_configs()
    config = tmp_path / "config.toml"
    config.write_text(text)
    settings = load_settings(db=tmp_path / "r.duckdb", environ={"A2X_HOME": str(tmp_path / "home"),
                                                                 "A2X_CONFIG": str(config)})
    try:
        check_config(settings)
    except UserError as exc:
        return exc.message
    return None


@pytest.mark.parametrize(("text", "said"), [
    ('[serve]\nmax_k = "50"\n', "[serve] max_k: the text '50', where a number belongs"),
    ('[registry]\nlock_timeout_s = "30"\n', "[registry] lock_timeout_s: the text '30'"),
    ("[serve]\nmax_k = true\n", "[serve] max_k: the boolean true, where a number belongs"),
    ("[registry]\nlock_timeout_s = false\n", "[registry] lock_timeout_s: the boolean false"),
    ("[serve]\nmax_k = 50.0\n", "[serve] max_k: 50.0, where a whole number belongs"),
    ('[evaluation]\nks = [1, "5"]\n', "[evaluation] ks[1]: the text '5'"),
    ('[search_presets.mine]\ngroup_cap = "5"\n', '[search_presets."mine"] group_cap: the text \'5\''),
    ('[models."m"]\npath = "m"\nmax_model_len = "4096"\n', '[models."m"] max_model_len: the text \'4096\''),
])
def test_numbers_written_as_text_or_booleans_are_refused_naming_file_and_key(tmp_path: Path, text: str, said: str):
    """Before, pydantic converted them: "50" and "30" were taken as numbers, true as 1."""
    message = checked(tmp_path, text)
    assert message is not None and said in message and str(tmp_path / "config.toml") in message, message


@pytest.mark.parametrize("text", ["[serve]\nmax_k = 50\n", "[registry]\nlock_timeout_s = 30\n",
                                  "[registry]\nlock_timeout_s = 2.5\n", "[evaluation]\npercent_ks = [1, 0.5]\n",
                                  '[engine]\nenforce_eager = "auto"\n'])
def test_numbers_written_as_numbers_pass(tmp_path: Path, text: str):
    assert checked(tmp_path, text) is None


def test_the_packaged_defaults_write_every_number_as_a_number():
    from a2x_local.config_check import _typed_numbers

    _section_configs()
    assert _typed_numbers(DEFAULT_TOML, tomllib.loads(DEFAULT_TOML.read_text(encoding="utf-8"))) == []


def test_overrides_given_as_text_still_convert(tmp_path: Path):
    """A flag or `-o key=value` arrives as text; only files are held to TOML's types."""
    from a2x_local.search.llm.methods import A2XOptions, search_config

    settings = load_settings(db=tmp_path / "r.duckdb", environ={"A2X_HOME": str(tmp_path / "home")})
    options = A2XOptions.model_validate({"prerank_min": "5", "prerank_share": "0.5"})     # as -o pairs give them
    config = search_config(settings, options)
    assert (config.prerank_min, config.prerank_share) == (5, 0.5)
    assert _SECTIONS["serve"].defaults(max_k="50").max_k == 50


def test_a_text_number_in_a_config_file_fails_every_command(tmp_path: Path):
    config = tmp_path / "text.toml"
    config.write_text('[serve]\nmax_k = "50"\n')
    done = subprocess.run(cli_command("stats", "--db", str(tmp_path / "r.duckdb")), capture_output=True, text=True,
                          env=tree_env(A2X_CONFIG=str(config), A2X_HOME=str(tmp_path / "home")), timeout=300)
    assert done.returncode == 1, done.stderr
    assert f"{config}: [serve] max_k: the text '50'" in done.stderr and "hint: fix the value" in done.stderr
    assert "this is a bug" not in done.stderr and not (tmp_path / "r.duckdb").exists()

# --- a writer waiting for the lock says so ----------------------------------------------------------------------

class Holder:
    """Another process holding the registry write lock as a nightly job would."""

    def __init__(self, db_path: Path) -> None:
        code = ("import sys, time\nfrom a2x_local.locks import RegistryLock\n"
                "with RegistryLock(sys.argv[1], 'nightly'):\n    print('held', flush=True)\n    time.sleep(120)\n")
        self.process = subprocess.Popen(python_command(code, str(db_path)), stdout=subprocess.PIPE, text=True,
                                        cwd=ROOT, env=tree_env())

    def __enter__(self) -> Holder:
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "held"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.process.kill()
        self.process.wait(timeout=30)


def test_a_waiting_writer_says_every_few_seconds_who_holds_the_lock(tmp_path: Path, caplog):
    db = tmp_path / "registry.duckdb"
    with Holder(db) as holder, caplog.at_level(logging.INFO, logger="a2x_local.locks"):
        started = time.monotonic()
        with pytest.raises(RegistryBusyError):
            RegistryLock(db, "ingest", wait_s=11).acquire()
        waited = time.monotonic() - started
    notes = [record.getMessage() for record in caplog.records if record.name == "a2x_local.locks"]
    assert 10 <= waited < 20 and 2 <= len(notes) <= 4, (waited, notes)
    assert all(f"process {holder.process.pid}: nightly" in note and "waiting" in note for note in notes), notes


def test_the_cli_shows_the_wait_on_stderr(tmp_path: Path):
    db = tmp_path / "registry.duckdb"
    config = tmp_path / "wait.toml"
    config.write_text("[registry]\nlock_timeout_s = 6\n")
    with Holder(db) as holder:
        done = subprocess.run(cli_command("ingest", str(SAMPLE), "--db", str(db)), capture_output=True, text=True,
                              env=tree_env(A2X_CONFIG=str(config)), timeout=300)
    assert done.returncode == 1 and "RegistryBusy" not in done.stdout
    assert f"waiting for the registry write lock, held by process {holder.process.pid}: nightly" in done.stderr, \
        done.stderr


# --- issue 32, fourth round: every configuration error names its file ------------------------------------------------

def refused(tmp_path: Path, text: str) -> UserError:
    """The error a configuration file holding ``text`` gets, when it is read or checked."""
    _section_configs()
    config = tmp_path / "config.toml"
    config.write_text(text)
    with pytest.raises(UserError) as caught:
        check_config(load_settings(db=tmp_path / "r.duckdb", environ={"A2X_HOME": str(tmp_path / "home"),
                                                                        "A2X_CONFIG": str(config)}))
    assert str(config) in caught.value.message, caught.value.message
    return caught.value


def test_a_whole_table_check_names_the_file_that_set_the_table(tmp_path: Path):
    """Before: `default_k > max_k` said "invalid configuration: [serve] table: ..." without the file."""
    error = refused(tmp_path, "[serve]\ndefault_k = 150\nmax_k = 100\n")
    assert "[serve] (the table as a whole)" in error.message and "default_k" in error.message, error.message


def test_a_single_value_where_a_table_belongs_says_it_must_be_a_table(tmp_path: Path):
    """Before: `registry = 5` got the hint "did you mean [registry]?"."""
    error = refused(tmp_path, "registry = 5\n")
    assert "registry must be a table" in error.message and "did you mean" not in (error.hint or ""), error
    assert "write [registry] on a line of its own" in (error.hint or ""), error.hint


@pytest.mark.parametrize(("text", "said"), [
    ("[registry]\nmax_json_depth = " + "9" * 5000 + "\n", "[registry] max_json_depth at line 2, column 18"),
    ("[serve]\nmax_k = 1_" + "0" * 4400 + "\n", "[serve] max_k at line 2, column 9"),
])
def test_an_integer_of_thousands_of_digits_names_file_table_key_and_place(tmp_path: Path, text: str, said: str):
    """Before: "unexpected ValueError: Exceeds the limit (4300 digits) ... this is a bug"."""
    error = refused(tmp_path, text)
    assert said in error.message and "more than 4,300 digits" in error.message, error.message
    assert "this is a bug" not in error.message


def test_brackets_nested_too_deeply_name_the_file(tmp_path: Path):
    """Before: 200,000 nested brackets gave "the input is nested too deeply to process" naming no file."""
    error = refused(tmp_path, "[serve]\nks = " + "[" * 5000 + "\n")
    assert "nested too deeply" in error.message and error.code == "TooDeep", error.message
