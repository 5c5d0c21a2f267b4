"""One rule for every failure, usage errors included (they once came as boxed rich panels, and with no JSON under
--json): stderr carries exactly an `error:` line and a `hint:` line in every mode; with --json, stdout carries
exactly one JSON error object and nothing else; without it, stdout is empty. Exit code 2 for usage, 1 for input."""

from __future__ import annotations

import json

import pytest

CASES = {
    "unknown option": (["search", "weather", "--bogus"], 2, "UsageError", "No such option: --bogus"),
    "bad choice": (["search", "weather", "-m", "a2x", "--mode", "sideways"], 2, "UsageError", "--mode"),
    "missing argument": (["services", "show"], 2, "UsageError", "Missing argument 'ID'"),
    "unknown command": (["serch", "weather"], 2, "UsageError", "Did you mean 'search'"),
    "out of bounds": (["search", "weather", "--k", "0"], 2, "UsageError", "--k"),
    "runtime error": (["services", "show", "no-such-service"], 1, "UserError", "no service with id"),
}


def two_lines(err: str, needle: str) -> None:
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("error: ") and needle in lines[0], err
    assert lines[1].startswith("hint: "), err
    assert not any(mark in err for mark in "╭╰│─"), f"a panel, not lines:\n{err}"


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_text_mode_is_two_lines_on_stderr_and_nothing_on_stdout(registry_db, cli, case: str):
    args, code, _, needle = CASES[case]
    result = cli(*args)
    assert result.code == code, result.err
    assert result.out == ""
    two_lines(result.err, needle)
    if code == 2:
        assert "--help" in result.err.splitlines()[1]   # the hint says where the usage is explained


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_json_mode_is_one_json_object_on_stdout(registry_db, cli, case: str):
    args, code, error, needle = CASES[case]
    result = cli(*args, "--json")
    assert result.code == code, result.err
    data = json.loads(result.out)   # the whole of stdout is one object
    assert set(data) == {"error", "message", "hint"} and data["error"] == error and needle in data["message"]
    assert data["hint"]
    two_lines(result.err, needle)
    assert result.err.splitlines()[0] == f"error: {data['message']}"
