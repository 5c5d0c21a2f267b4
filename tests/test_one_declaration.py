"""Each setting is declared once, in its table's model: the per-run options (engine options, method options) and the
command-line flags generated from them take its type and bounds from there, and the docs name each of them.

Before, the engine flags were declared three times and disagreed (`--gpu-memory-utilization` at least 0.05 on the
command line, above 0 in the models), and the LLM methods' options copied [search] bounds and lost the upper ones.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from a2x_local.cli import app
from a2x_local.cli.options import ENGINE_FLAGS, METHOD_FLAGS
from a2x_local.compose import COMPOSE_SPEC
from a2x_local.llm import EngineOptions
from a2x_local.llm.config import EngineConfig, OpenAIConfig
from a2x_local.overrides import field_bounds
from a2x_local.search import MethodFlags, method_names, method_spec
from a2x_local.settings import table_models
from tests.test_cli_numeric_bounds import bounds_of, numeric_params

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "a2x_local"
# Where per-run options, flags and alias settings are declared: a bound written in one of them restates a setting's,
# except on the declarations of `OWN_BOUNDS`, which override no setting (their names are no table's key).
DECLARING = ["llm/options.py", "llm/models.py", "search/flags.py", "search/llm/methods.py",
             "search/retrieval/methods.py", "compose/method.py", "cli/options.py",
             *sorted(str(path.relative_to(PACKAGE)) for path in (PACKAGE / "cli").glob("*_cmds.py"))]
OWN_BOUNDS = {
    "llm/models.py": {"gpu_memory_gb"},                              # what an alias's weights need: no [engine] key
    "cli/eval_cmds.py": {"k", "limit", "held_out"},                  # a run's answer size, its first N, the split
    "cli/gateway_cmds.py": {"limit"},
    "cli/registry_cmds.py": {"limit", "offset"},
    "cli/tree_cmds.py": {"TreeIdOption", "TreeIdArgument", "depth", "base", "a", "b"},
}
BOUND_KEYWORDS = {"ge", "gt", "le", "lt", "min", "max"}
# Options named otherwise than the key they override.
RENAMED = {"engine": "name", "params": "text_params", "body": "text_body"}


def _source_field(options: Any, name: str) -> Any:
    """The configured field an option overrides: `[engine]`'s, `[engine.openai]`'s, or its method's table's."""
    key = RENAMED.get(name, name)
    for model in (EngineConfig, OpenAIConfig, *table_models().values()):
        if key in model.model_fields and (model is not EngineConfig or name in EngineOptions.model_fields or
                                          options is EngineOptions):
            return model.model_fields[key]
    return None


def _base_types(annotation: Any) -> set[Any]:
    found = {annotation}
    for arg in getattr(annotation, "__args__", ()):
        found |= _base_types(arg)
    return found - {type(None)}


def test_every_engine_option_is_an_engine_setting_with_its_bounds():
    for name, info in EngineOptions.model_fields.items():
        key = RENAMED.get(name, name)
        table = OpenAIConfig if name == "base_url" else EngineConfig
        config = table.model_fields[key]
        assert field_bounds(info) == field_bounds(config), f"--{name}: bounds differ from [{table.section}] {key}"
        assert _base_types(config.annotation) <= _base_types(info.annotation), name
        assert info.default is None and info.description, f"{name}: a flag needs None (not given) and a help text"


@pytest.mark.parametrize("method", method_names())
def test_every_method_option_named_after_a_setting_has_that_setting_s_bounds(method: str):
    options = method_spec(method).options
    compared = 0
    for name, info in options.model_fields.items():
        config = _source_field(options, name)
        if config is None:
            continue
        assert field_bounds(info) == field_bounds(config), f"{method} -o {name}: bounds differ from the setting"
        compared += 1
    assert compared, f"{method}: no option compared"


def test_options_refuse_what_the_table_refuses():
    """An upper bound the options had lost: `-o merge_threshold` and `-o group_cap` were unbounded above."""
    spec = method_spec("a2x")
    search = table_models()["search"].model_fields
    for name in ("merge_threshold", "group_cap", "max_services_selected", "service_description_chars"):
        above = field_bounds(search[name])["le"] + 1
        with pytest.raises(ValueError, match=name):
            spec.options.model_validate({name: above})
    assert spec.options.model_validate({"pack_groups": "true"}).pack_groups is True   # -o values arrive as text
    compose = COMPOSE_SPEC.options.model_fields
    assert field_bounds(compose["candidates"]) == {"ge": 1, "le": 100}


def _written(value: ast.expr) -> bool:
    """A bound written by hand: a number (-1 too) or a named constant, not one read from a field."""
    if isinstance(value, ast.UnaryOp):
        value = value.operand
    return isinstance(value, ast.Name) or (isinstance(value, ast.Constant) and isinstance(value.value, int | float))


def _written_bounds(source: str) -> list[tuple[str, int]]:
    """(the parameter, field or name declared, line) of every hand-written bound in a module's source."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(k.arg in BOUND_KEYWORDS and _written(k.value) for k in node.keywords):
            owner: ast.AST | None = node
            while owner is not None and not isinstance(owner, ast.arg | ast.AnnAssign | ast.Assign):
                owner = parents.get(owner)
            target = (owner.target if isinstance(owner, ast.AnnAssign) else owner.targets[0]
                      if isinstance(owner, ast.Assign) else None)
            name = owner.arg if isinstance(owner, ast.arg) else getattr(target, "id", "?")
            found.append((name, node.lineno))
    return found


def test_no_declaring_module_writes_a_bound_of_its_own():
    found = {path: _written_bounds((PACKAGE / path).read_text(encoding="utf-8")) for path in DECLARING}
    restated = [f"{path}:{line}: {name}" for path, bounds in found.items() for name, line in bounds
                if name not in OWN_BOUNDS.get(path, set())]
    assert restated == [], "bounds belong to the configuration models:\n" + "\n".join(restated)
    for path, names in OWN_BOUNDS.items():   # the exceptions stay true: still there, and no setting's name
        assert names == {name for name, _ in found[path]}, path
    keys = {key for model in (EngineConfig, OpenAIConfig, *table_models().values()) for key in model.model_fields}
    assert not {name for names in OWN_BOUNDS.values() for name in names} & keys


def test_the_check_finds_a_restated_bound():
    """What `compose --k` wrote before it took `[compose] candidates`' bounds."""
    source = ('def f(k: Annotated[int | None, typer.Option("--k", min=1, max=100)] = None): ...\n'
              "class Alias(BaseModel):\n    max_model_len: int | None = Field(None, ge=16, le=-1)\n"
              "class Generated(BaseModel):\n    n: int = Field(**bounds)\nflag = Option(min=bounds.get('ge'))\n")
    assert sorted(_written_bounds(source)) == [("k", 1), ("max_model_len", 3)]


def test_a_flag_that_overrides_a_setting_takes_its_bounds():
    """A numeric flag whose help names its default's key (`default: \\[compose] candidates`) is that key's override:
    `compose --k` and `--alpha`, `search --k`, `serve --port` and `eval --batch-size` wrote their own."""
    models = {**table_models(), "engine": EngineConfig, "engine.openai": OpenAIConfig}
    pattern = re.compile(r"default:[^)]*?\\?\[([\w.]+)\] (\w+)")
    checked = set()
    for where, param in numeric_params().items():
        named = pattern.search(param.help or "")
        if named is None:
            continue
        table, key = named.groups()
        bounds = field_bounds(models[table].model_fields[key])
        assert bounds_of(param) == (bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))), where
        checked.add(where)
    assert {"compose --k", "compose --alpha", "search --k", "serve --port", "eval --batch-size",
            "eval compare-presets --batch-size", "nightly --keep"} <= checked


def _engine_commands() -> dict[str, Any]:
    root = typer.main.get_command(app)
    found = {}
    stack = [("", root)]
    while stack:
        path, command = stack.pop()
        for name, sub in getattr(command, "commands", {}).items():
            stack.append((f"{path} {name}".strip(), sub))
        if any("--max-model-len" in param.opts for param in getattr(command, "params", [])):
            found[path] = command
    return found


def test_generated_flags_carry_the_field_s_bounds_and_help_on_every_command():
    commands = _engine_commands()
    assert {"build", "search", "eval", "serve", "compose", "tree update", "nightly"} <= set(commands)
    runner = CliRunner()
    for path, command in commands.items():
        params = {opt: param for param in command.params for opt in param.opts}
        helped = runner.invoke(app, [*path.split(), "--help"], env={"COLUMNS": "300"}).output
        for name, info in EngineOptions.model_fields.items():
            flag = f"--{name.replace('_', '-')}"
            if flag not in params:
                continue
            param, bounds = params[flag], field_bounds(info)
            assert flag in helped, f"{path} --help lacks {flag}"
            if "gt" in bounds or "lt" in bounds:
                assert "above" in param.help or "below" in param.help, f"{path} --{name}: open bound not said"
            else:
                assert (param.min, param.max) == (bounds.get("ge"), bounds.get("le")), f"{path} --{name}"
            assert param.help.startswith(info.description.split("[")[0].rstrip("\\")), f"{path} --{name}"
    for name, info in MethodFlags.model_fields.items():
        flag = METHOD_FLAGS[name].__metadata__[0]
        assert flag.help.startswith(info.description.split("[")[0]), name


def test_the_open_bound_is_a_usage_error_and_values_above_it_pass():
    parse = ENGINE_FLAGS["gpu_memory_utilization"].__metadata__[0].parser
    assert parse("0.04") == pytest.approx(0.04)      # refused before by the command line's own minimum of 0.05
    with pytest.raises(typer.BadParameter, match="greater than 0"):
        parse("0")
    result = CliRunner().invoke(app, ["search", "x", "--gpu-memory-utilization", "0"])
    assert result.exit_code == 2 and "--gpu-memory-utilization" in result.output


def test_docs_name_every_flag_and_setting():
    cli = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    configuration = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    engines = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
    for name in EngineOptions.model_fields:
        flag = f"--{name.replace('_', '-')}"
        assert f"`{flag}`" in cli and f"| `{flag}` |" in engines, flag
        assert f"| `{RENAMED.get(name, name)}` |" in configuration, name
    for name in (*MethodFlags.model_fields, "group_lists", "preset", "direct_select_below"):
        assert f"| `{RENAMED.get(name, name)}` |" in configuration, name


def test_build_flags_carry_the_build_table_s_bounds():
    """`--max-depth` took any depth from 1 up while [build] max_depth stops at 8 (the build refused it later)."""
    command = typer.main.get_command(app).commands["build"]
    params = {opt: param for param in command.params for opt in param.opts}
    build = table_models()["build"].model_fields
    for flag, key in {"--leaf-size": "leaf_max_services", "--max-depth": "max_depth", "--max-children":
                      "max_children", "--keyword-threshold": "keyword_path_min_services",
                      "--refine-passes": "refine_passes"}.items():
        bounds = field_bounds(build[key])
        assert (params[flag].min, params[flag].max) == (bounds["ge"], bounds["le"]), flag
    assert params["--keyword-merge"].metavar == "embedding|stem"
