"""The seventh round of hostile probes (issue 32), the findings outside the offline kit and the terminal: a SQLite
file as the registry (DuckDB went to the network for an extension), audit spools that are not spools, a registry
name too long for its lock file, configuration files nested thousands of levels deep or over their fixed size, model
aliases whose errors named no file, and a model folder's tokenizer read whole whatever its size."""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path

import duckdb
import pytest

from a2x_local.db import NO_EXTENSIONS, connect_when_free
from a2x_local.errors import UserError
from a2x_local.gateway import AuditLog, GatewayConfig
from a2x_local.gateway.audit import MAX_SPOOL_BYTES, read_spool
from a2x_local.llm.model_check import MODEL_FILE_MAX_BYTES, check_model
from a2x_local.locks import RegistryLock
from a2x_local.settings import CONFIG_MAX_DEPTH, load_settings
from tests.support.registries import make_registry


# ---- P07: another database's file as the registry; no extension fetched or loaded -----------------------------------
def sqlite_file(path: Path) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    return path


def test_a_sqlite_file_as_the_registry_is_refused_by_its_header_and_left_as_it_was(cli, tmp_path: Path, home):
    registry = sqlite_file(tmp_path / "registry.duckdb")
    before = registry.read_bytes()
    code, _, err = cli("stats")
    assert code == 1 and "is a SQLite database, another program's database" in err, err
    assert registry.read_bytes() == before and not (tmp_path / "registry.duckdb.wal").exists()


def test_no_connection_installs_or_loads_an_extension_by_itself(tmp_path: Path, monkeypatch):
    """Before: DuckDB, given a SQLite file, downloaded `sqlite_scanner` from extensions.duckdb.org (DNS lookups
    seen) into ~/.duckdb, and would have opened the file through it."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    con = connect_when_free(tmp_path / "r.duckdb", read_only=False, wait_s=1, busy="busy", hint="")
    try:
        for setting, value in NO_EXTENSIONS.items():
            assert con.execute(f"SELECT current_setting('{setting}')").fetchone()[0] is value
        # Through the connection itself (past the header check): refused at once, nothing fetched or written.
        started = time.monotonic()
        with pytest.raises(duckdb.Error):
            con.execute(f"ATTACH '{sqlite_file(tmp_path / 'other.db')}' AS other (TYPE sqlite)")
        assert time.monotonic() - started < 5
    finally:
        con.close()
    assert not (tmp_path / "user" / ".duckdb").exists()


# ---- P15: files named like audit spools that are not spools ----------------------------------------------------------
def planted_spools(db: Path) -> dict[str, Path]:
    fifo = db.with_name(f"{db.name}.audit-spool-4194301.jsonl")
    os.mkfifo(fifo)
    link = db.with_name(f"{db.name}.audit-spool-4194302.jsonl")
    link.symlink_to("/dev/zero")
    huge = db.with_name(f"{db.name}.audit-spool-4194303.jsonl")
    with open(huge, "wb") as file:
        file.truncate(MAX_SPOOL_BYTES + 1)        # sparse: costs no disk
    return {"fifo": fifo, "link": link, "huge": huge}


def test_audit_names_spools_that_are_not_spools_and_reads_none_of_them(cli, registry_db: Path, caplog):
    """Before: a named pipe there hung `a2x-local audit` silently; a link to /dev/zero took 17.6 GB in 40 s."""
    planted = planted_spools(registry_db)
    started = time.monotonic()
    with caplog.at_level(logging.ERROR, logger="a2x_local.gateway"):
        code, _, err = cli("audit", "--json")
    assert code == 0, err
    assert time.monotonic() - started < 30
    said = caplog.text
    assert f"{planted['fifo']} not read: is a named pipe" in said, said
    assert f"{planted['link']} not read: is a symbolic link" in said, said
    assert f"{planted['huge']} not read: is over the" in said, said
    assert all(path.is_symlink() or path.exists() for path in planted.values())     # left as they were


def test_a_server_takes_over_only_spools_a_server_wrote(registry_db: Path, caplog):
    planted = planted_spools(registry_db)
    with caplog.at_level(logging.ERROR, logger="a2x_local.gateway"):
        audit = AuditLog(registry_db, GatewayConfig.defaults())
    try:
        assert audit.pending == 0
    finally:
        audit.close()
    for path in planted.values():
        assert f"{path} not taken over" in caplog.text
        assert path.is_symlink() or path.exists()             # neither renamed nor removed: not ours


def test_a_spool_is_read_without_following_a_link(tmp_path: Path, caplog):
    real = tmp_path / "real.jsonl"
    real.write_text("", encoding="utf-8")
    link = tmp_path / "r.duckdb.audit-spool-1.jsonl"
    link.symlink_to(real)
    with caplog.at_level(logging.ERROR, logger="a2x_local.gateway"):
        assert read_spool(link) == []
    assert "is a symbolic link" in caplog.text


# ---- P17: a registry name that leaves no room for its lock file ------------------------------------------------------
def test_a_registry_name_too_long_for_its_lock_file_says_so(tmp_path: Path, home):
    """Before: "cannot create the registry's lock file: File name too long", hint "check the folder"."""
    registry = make_registry(tmp_path / ("r" * 240 + ".duckdb"))      # 247 bytes: '.write.lock' passes 255
    with pytest.raises(UserError) as caught, RegistryLock(registry, "ingest"):
        pass
    assert "its name is too long" in caught.value.message and "255 bytes" in caught.value.message
    assert caught.value.hint == "give the registry a shorter name (--db)"


# ---- P10, P11: configuration files too big or nested too deep -------------------------------------------------------
@pytest.mark.parametrize("text", ["[" + ".".join(["a"] * 3000) + "]\nx = 1\n", "x." + ".".join(["a"] * 3000) + " = 1\n",
                                  "[" + ".".join(["a"] * (CONFIG_MAX_DEPTH + 1)) + "]\nx = 1\n"],
                         ids=["headers", "dotted-keys", "one-past"])
def test_a_configuration_nested_too_deep_names_its_file(tmp_path: Path, text: str):
    """Before: "the input is nested too deeply to process" (the merge's recursion), no file named."""
    config = tmp_path / "deep.toml"
    config.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        load_settings(environ={"A2X_HOME": str(tmp_path / "home"), "A2X_CONFIG": str(config)})
    assert caught.value.message.startswith(f"{config}: tables or keys nested more than {CONFIG_MAX_DEPTH} levels")


def test_a_configuration_at_the_depth_limit_loads(tmp_path: Path):
    config = tmp_path / "deep.toml"
    config.write_text("[" + ".".join(["a"] * CONFIG_MAX_DEPTH) + "]\n", encoding="utf-8")
    settings = load_settings(environ={"A2X_HOME": str(tmp_path / "home"), "A2X_CONFIG": str(config)})
    assert "a" in settings.config


def test_a_configuration_file_too_big_gets_a_hint_that_works(tmp_path: Path):
    """Before: "raise [registry] max_file_bytes to accept it", which the fixed 1 MiB cap ignores."""
    config = tmp_path / "big.toml"
    config.write_text("[registry]\nmax_file_bytes = 100000000\n# " + "x" * (2 << 20) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as caught:
        load_settings(environ={"A2X_HOME": str(tmp_path / "home"), "A2X_CONFIG": str(config)})
    assert "is fixed" in (caught.value.hint or "") and "raise" not in (caught.value.hint or "")


# ---- P08: a model alias's errors name the file, the table and the field ---------------------------------------------
ALIAS_CASES = [
    ('[models.x]\npath = "p"\ngpu_memory_gb = 1e9\n', '[models."x"] gpu_memory_gb: ', "fix gpu_memory_gb"),
    ("[models]\nx = 5\n", '[models."x"]: must be a table, not int', 'write [models."x"] on a line of its own'),
    ("[models.x]\ngpu_memory_gb = 3\n", '[models."x"] path: Field required', "each alias needs a `path`"),
]


@pytest.mark.parametrize(("text", "said", "hint"), ALIAS_CASES, ids=["bound", "not-a-table", "no-path"])
def test_a_bad_model_alias_is_named_by_its_file(cli, tmp_path: Path, home, monkeypatch, text: str, said: str,
                                                hint: str):
    config = tmp_path / "aliases.toml"
    config.write_text(text, encoding="utf-8")
    monkeypatch.setenv("A2X_CONFIG", str(config))
    code, _, err = cli("models", "list", db=False)
    assert code == 1 and f"error: {config}: {said}" in err, err
    assert hint in err and "instance of" not in err, err


# ---- P14: a model folder's tokenizer files bounded before a loader reads them ----------------------------------------
def test_a_tokenizer_json_past_the_cap_is_refused_before_the_loader_reads_it(tiny_model_dir: Path, tmp_path: Path):
    """Before: a 300 MB tokenizer.json was read whole (1 GB RSS), then "does not load: 'added_tokens'"."""
    import shutil

    folder = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    with open(folder / "tokenizer.json", "r+b") as file:
        file.truncate(MODEL_FILE_MAX_BYTES + 1)
    check = check_model(folder)
    assert any(f"{folder / 'tokenizer.json'}: is {MODEL_FILE_MAX_BYTES + 1:,} bytes" in p for p in check.problems), \
        check.problems


def test_a_deeply_nested_tokenizer_json_is_named(tiny_model_dir: Path, tmp_path: Path):
    import shutil

    folder = Path(shutil.copytree(tiny_model_dir, tmp_path / "model"))
    (folder / "tokenizer.json").write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")
    check = check_model(folder)
    assert any(str(folder / "tokenizer.json") in p and "nested" in p for p in check.problems), check.problems
