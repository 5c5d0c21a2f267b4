"""`a2x-local models list|check` through the real CLI entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from a2x_local.cli import run
from tests.support.fake_model import FAKE_PARAMETERS, write_fake_model


@pytest.fixture
def models_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("A2X_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("A2X_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


def test_list_json_shows_each_alias_and_whether_it_is_present(models_dir: Path, capsys) -> None:
    write_fake_model(models_dir / "Qwen2.5-1.5B-Instruct")
    assert run(["models", "list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["alias"]: row for row in data["models"]}
    assert data["models_dir"] == str(models_dir)
    assert rows["qwen2.5-1.5b"]["present"] is True and rows["qwen2.5-7b"]["present"] is False
    assert rows["qwen2.5-32b"]["tensor_parallel_size"] == 2


def test_list_table_for_people(models_dir: Path, capsys) -> None:
    assert run(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert "qwen2.5-7b" in out and "deepseek-r1-distill-qwen-7b" in out


def test_check_of_a_complete_folder_exits_0_with_the_estimate(models_dir: Path, capsys) -> None:
    folder = write_fake_model(models_dir / "Fake")
    assert run(["models", "check", str(folder), "--max-model-len", "2048", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["parameters"] == FAKE_PARAMETERS
    assert data["memory"]["max_model_len"] == 2048


def test_check_of_a_missing_alias_exits_1_naming_the_folder_to_fill(models_dir: Path, capsys) -> None:
    assert run(["models", "check", "qwen2.5-7b"]) == 1
    out = capsys.readouterr().out
    assert "missing:" in out and str(models_dir / "Qwen2.5-7B-Instruct") in out.replace("\n", "")
    assert "Qwen/Qwen2.5-7B-Instruct" in out.replace("\n", "")


def test_check_json_of_an_incomplete_folder_lists_the_problems(models_dir: Path, capsys) -> None:
    folder = write_fake_model(models_dir / "Half", shards=2)
    (folder / "model-00001-of-00002.safetensors").unlink()
    assert run(["models", "check", str(folder), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is False and any("weight shards are missing" in p for p in data["problems"])


def test_check_of_an_unknown_name_is_a_user_error(models_dir: Path, capsys) -> None:
    assert run(["models", "check", "/no/such/model"]) == 1
    assert "does not exist" in capsys.readouterr().out.replace("\n", "")


def test_make_tiny_writes_a_model_that_models_check_accepts(tmp_path: Path, capsys) -> None:
    target = tmp_path / "tiny"
    assert run(["models", "make-tiny", str(target), "--json"]) == 0
    written = json.loads(capsys.readouterr().out)
    assert written["path"] == str(target.resolve()) and written["bytes"] > 1_000_000
    assert run(["models", "check", str(target), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True
    again = run(["models", "make-tiny", str(target)])
    assert again == 1 and "already exists" in capsys.readouterr().err
