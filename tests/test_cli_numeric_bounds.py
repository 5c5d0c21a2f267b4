"""Every number a command takes has both bounds (the audit after issue 32): `services list --offset -1`, `--offset
99999999999999999999`, `--limit -5` and `--limit 10**20` reached DuckDB and ended in "hint: this is a bug".

The walk covers every command, plug-ins' and generated flags included, so a new numeric flag without a range fails
here rather than in a user's hands. A flag is bounded by typer's closed `min`/`max`, or by the parser a setting's
open bound gets (`cli/options.py`), which carries its bounds for this check."""

from __future__ import annotations

from typing import Any, get_args

import pytest
import typer

from a2x_local.cli import app

# "COMMAND PARAM": why it may take any number. Empty: every numeric flag and argument has both bounds.
EXEMPT: dict[str, str] = {}

PROBES = {   # the arguments, and the flag or argument the error names
    "offset below 0": (["services", "list", "--offset", "-1"], "--offset"),
    "offset past BIGINT": (["services", "list", "--offset", "99999999999999999999"], "--offset"),
    "limit below 0": (["services", "list", "--limit", "-5"], "--limit"),
    "limit 10**20": (["services", "list", "--limit", str(10**20)], "--limit"),
    "tree id past INTEGER": (["tree", "show", "--id", str(2**31)], "--id"),
    "tree id 0": (["tree", "activate", "0"], "build_id"),
    "tree depth": (["tree", "show", "--depth", str(10**9)], "--depth"),
    "nightly keep": (["nightly", "--source", ".", "--keep", str(10**12)], "--keep"),
    "eval k": (["eval", "--k", str(10**12)], "--k"),
    "audit limit": (["audit", "--limit", str(10**20)], "--limit"),
    "max description chars 0": (["ingest", ".", "--max-description-chars", "0"], "--max-description-chars"),
}


def numeric_params() -> dict[str, Any]:
    """Every option and argument of every command whose value is an int or a float, by "command param"."""
    found: dict[str, Any] = {}
    stack: list[tuple[str, Any]] = [("", typer.main.get_command(app))]
    while stack:
        path, command = stack.pop()
        for name, sub in getattr(command, "commands", {}).items():
            stack.append((f"{path} {name}".strip(), sub))
        for param in getattr(command, "params", []):
            annotation = param.type_descriptor.annotation
            if any(kind in (int, float) for kind in get_args(annotation) or (annotation,)):
                found[f"{path or 'a2x-local'} {param.opts[0]}"] = param
    return found


def bounds_of(param: Any) -> tuple[Any, Any]:
    """The lowest and highest value a parameter takes (None: unbounded on that side)."""
    parser = param.type_descriptor.parameter_info.parser
    if parser is not None:
        bounds = getattr(parser, "bounds", {})
        return bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
    return param.min, param.max


def test_the_walk_finds_the_numeric_flags_of_every_kind_of_command():
    found = numeric_params()
    assert {"services list --limit", "services list --offset", "search --k", "tree activate build_id",
            "build --max-depth", "search --gpu-memory-utilization", "nightly --keep"} <= set(found), sorted(found)


def test_every_numeric_flag_and_argument_has_a_lowest_and_a_highest_value():
    unbounded = [f"{name}: {bounds_of(param)}" for name, param in sorted(numeric_params().items())
                 if name not in EXEMPT and None in bounds_of(param)]
    assert unbounded == [], "numbers without both bounds (give typer min= and max=, or the setting's field):\n" + \
        "\n".join(unbounded)
    assert set(EXEMPT) <= set(numeric_params()), "an exemption names a flag that no longer exists"


def test_setting_flags_take_the_bounds_of_their_field():
    from a2x_local.overrides import field_bounds
    from a2x_local.settings import table_models

    found = numeric_params()
    for name, (table, key) in {"nightly --keep": ("lifecycle", "keep_trees"),
                               "nightly --max-drop": ("lifecycle", "max_drop"),
                               "ingest --max-description-chars": ("registry", "max_description_chars")}.items():
        bounds = field_bounds(table_models()[table].model_fields[key])
        assert bounds_of(found[name]) == (bounds["ge"], bounds["le"]), name


@pytest.mark.parametrize("probe", PROBES, ids=list(PROBES))
def test_out_of_range_numbers_are_usage_errors_naming_the_flag(cli, probe: str):
    args, named = PROBES[probe]
    result = cli(*args)
    assert result.code == 2, result.err
    first = result.err.splitlines()[0]
    assert first.startswith("error: Invalid value for ") and named in first, result.err
    assert "greater than" in first or "less than" in first, result.err
    assert "this is a bug" not in result.err and "Traceback" not in result.err and result.out == ""


def test_in_range_values_still_list(cli, registry_db):
    assert cli("services", "list", "--offset", "0", "--limit", "0").code == 0
    done = cli("services", "list", "--offset", "1000000000", "--limit", "1000000000")
    assert done.code == 0, done.err
