"""The fifth round of hostile inputs to the model commands (F01-F04, F11): GGUF headers whose counts claim more than
the file holds, nest 20,000 deep or hold values of the wrong type; model folders of valid JSON in the wrong shape or
nested thousands deep; link loops given as the model. Each is refused naming the file and the key or field, exit 1,
quickly and in bounded memory; no engine is started and no GGUF is converted.
"""

from __future__ import annotations

import json
import os
import signal
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from a2x_local.delivery import verify_model
from a2x_local.errors import UserError
from a2x_local.llm.gguf_file import inspect_gguf
from a2x_local.llm.gguf_header import MAX_ARRAY, MAX_NESTING, MAX_STRING, MAX_VALUES
from a2x_local.llm.model_check import check_model


def text(value: bytes) -> bytes:
    return struct.pack("<Q", len(value)) + value


def header(keys: int, tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, tensors, keys)


def kv_text(key: bytes, value: bytes) -> bytes:
    return text(key) + struct.pack("<I", 8) + text(value)


def kv_array(key: bytes, item: int, length: int, body: bytes = b"") -> bytes:
    return text(key) + struct.pack("<IIQ", 9, item, length) + body


ARCH = kv_text(b"general.architecture", b"llama")


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail, instead of hanging, where a reader would loop on a count it trusted (SIGALRM interrupts Python code)."""
    def expire(*_: Any) -> None:
        raise TimeoutError(f"still reading after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def refused(path: Path, data: bytes, words: list[str] | tuple[str, ...] = ()) -> str:
    """The message refusing ``data`` as a GGUF file: it names the file first and holds every one of ``words``."""
    path.write_bytes(data)
    with deadline(5), pytest.raises(UserError) as refusal:
        inspect_gguf(path)
    assert refusal.value.hint
    message = refusal.value.message
    assert message.startswith(f"{path}: ")
    for word in words:
        assert word in message, message
    return message


# F01: counts and lengths bounded by the file's size and by caps, before the gguf reader meets them.
@pytest.mark.parametrize(("data", "words"), [
    (header(1) + kv_array(b"general.architecture_x", 0, 2**62),
     ["'general.architecture_x'", "array length", "4,611,686,018,427,387,904 UINT8 values", "truncated"]),
    (header(1) + kv_array(b"b", 7, 2**62), ["'b'", "BOOL values"]),
    (header(1) + kv_array(b"f", 12, 2**40), ["'f'", "FLOAT64 values"]),
    (header(1) + kv_array(b"s", 8, 2**40), ["'s'", "STRING values"]),
    (header(1) + kv_array(b"big", 0, MAX_ARRAY + 1, bytes(MAX_ARRAY + 1)),
     ["'big'", f"over the limit of {MAX_ARRAY:,}"]),
    (header(1) + text(b"t") + struct.pack("<IQ", 8, MAX_STRING + 1), ["text of the header key 't'", "over the limit"]),
    (header(2**40), ["key-value count", "1,099,511,627,776 keys", "truncated"]),
    (header(0, 2**40), ["tensor count", "tensors"]),
    (header(1) + struct.pack("<Q", 2**60) + bytes(8), ["the name of header key 0", "over the limit of 65,535"]),
    (b"GGUF" + struct.pack("<I", 1) + bytes(16), ["GGUF version 1", "version field"]),
], ids=["uint8-2^62", "bool", "float64", "strings", "over-the-cap", "long-text", "keys", "tensors", "key-name",
        "version"])
def test_header_counts_claiming_more_than_the_file_or_the_caps_are_refused(tmp_path: Path, data: bytes,
                                                                           words: list[str]) -> None:
    refused(tmp_path / "bomb.gguf", data, words)


def test_the_70_byte_bomb_exits_1_from_the_command_in_bounded_time(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("A2X_MODELS_DIR", str(tmp_path / "models"))
    bomb = tmp_path / "bomb.gguf"
    bomb.write_bytes(header(1) + kv_array(b"general.architecture_x", 0, 2**62))
    with deadline(10):
        result = cli("models", "import", bomb, "--name", "bombtest", db=False)
    assert result.code == 1 and "Traceback" not in result.err
    assert f"{bomb}:" in result.err and "'general.architecture_x'" in result.err
    assert not (tmp_path / "models" / "bombtest").exists()


# F02: nesting, in a GGUF value and in a model folder's JSON, named with the file (and key).
def test_a_gguf_value_nested_20000_arrays_deep_is_refused_naming_the_key(tmp_path: Path) -> None:
    nested = kv_array(b"x", 9, 1, struct.pack("<IQ", 9, 1) * 19_999 + struct.pack("<IQI", 4, 1, 1))
    message = refused(tmp_path / "deep.gguf", header(1) + nested)
    assert "'x'" in message and f"nested more than {MAX_NESTING} deep" in message


def deep_config(folder: Path, levels: int) -> None:
    (folder / "config.json").write_text('{"model_type": "qwen2", "x": ' + "[" * levels + "]" * levels + "}")


def test_a_config_nested_5000_deep_is_named_by_check_and_pack(cli, fake_model_dir: Path, tmp_path: Path) -> None:
    deep_config(fake_model_dir, 5000)
    result = check_model(fake_model_dir)
    config = str(fake_model_dir / "config.json")
    assert any(config in p and "nested too deeply" in p for p in result.problems), result.problems
    packed = cli("models", "pack", fake_model_dir, "--out", tmp_path / "out", db=False)
    assert packed.code == 1 and "Traceback" not in packed.err
    assert config in " ".join(packed.err.split()) and "nested too deeply" in packed.err


def test_a_config_nested_past_the_limit_names_where(fake_model_dir: Path) -> None:
    deep_config(fake_model_dir, 100)
    problem = " ".join(check_model(fake_model_dir).problems)
    assert "config.json" in problem and "$.x[0]" in problem


def test_a_deep_tokenizer_side_file_is_named_before_the_tokenizer_loads(fake_model_dir: Path) -> None:
    (fake_model_dir / "special_tokens_map.json").write_text("[" * 5000 + "]" * 5000)
    problem = " ".join(check_model(fake_model_dir).problems)
    assert "special_tokens_map.json" in problem and "nested too deeply" in problem


# F03: header values of the wrong type, named by key.
@pytest.mark.parametrize(("data", "words"), [
    (header(2) + ARCH + kv_text(b"split.count", b"abc"), ["'split.count'", "STRING, not an integer"]),
    (header(2) + ARCH + kv_array(b"general.file_type", 4, 2, struct.pack("<II", 2, 3)),
     ["'general.file_type'", "ARRAY, not an integer"]),
    (header(2) + ARCH + kv_text(b"llama.context_length", b"abc"), ["'llama.context_length'", "not an integer"]),
    (header(1) + kv_text(b"general.architecture", b"\xff\xfe"), ["'general.architecture'", "not UTF-8", "0xff"]),
    (header(1) + text(b"general.architecture") + struct.pack("<II", 4, 7), ["'general.architecture'", "not text"]),
    (header(1) + text(b"k\xff") + struct.pack("<IB", 0, 1), ["header key 0", "not UTF-8"]),
    (header(2) + ARCH + ARCH, ["'general.architecture' appears twice"]),
], ids=["split-count-text", "file-type-array", "context-length-text", "architecture-not-utf8",
        "architecture-number", "key-not-utf8", "duplicate-key"])
def test_header_values_of_the_wrong_type_are_refused_naming_the_key(tmp_path: Path, data: bytes,
                                                                    words: list[str]) -> None:
    refused(tmp_path / "typed.gguf", data, words)


# F04: valid JSON of the wrong shape in a model folder: a problem naming the file and the field.
def edit(folder: Path, name: str, change: Callable[[Any], Any]) -> None:
    path = folder / name
    path.write_text(json.dumps(change(json.loads(path.read_text()))))


def setting(key: str, value: Any) -> Callable[[Any], Any]:
    return lambda config: {**config, key: value}


@pytest.mark.parametrize(("name", "change", "field"), [
    ("config.json", setting("architectures", {"x": 1}), "'architectures'"),
    ("config.json", setting("architectures", 5), "'architectures'"),
    ("config.json", setting("model_type", {"a": 1}), "'model_type'"),
    ("config.json", setting("text_config", None), "'text_config' is null"),
    ("config.json", setting("text_config", {"num_hidden_layers": "abc"}), "'text_config.num_hidden_layers'"),
    ("config.json", setting("num_hidden_layers", "abc"), "'num_hidden_layers' is text \"abc\""),
    ("config.json", setting("num_hidden_layers", [1]), "'num_hidden_layers' is an array"),
    ("config.json", setting("num_attention_heads", float("nan")), "'num_attention_heads' is the number NaN"),
    ("config.json", setting("hidden_size", True), "'hidden_size' is a boolean"),
    ("config.json", setting("num_key_value_heads", -2), "'num_key_value_heads'"),
    ("tokenizer_config.json", lambda _: [], "is an array [], not an object"),
    ("model.safetensors.index.json", lambda _: {"weight_map": {"a": 5}}, "'weight_map.a' is the number 5"),
    ("model.safetensors.index.json", lambda _: {"weight_map": [1]}, "'weight_map' is an array"),
    ("model.safetensors.index.json", lambda _: {"weight_map": {"a": "x\0y"}}, "'weight_map.a'"),
], ids=["architectures-object", "architectures-number", "model-type-object", "text-config-null",
        "text-config-layers", "layers-text", "layers-array", "heads-nan", "hidden-bool", "kv-heads-negative",
        "tokenizer-config-list", "index-number", "index-array", "index-nul"])
def test_json_of_the_wrong_shape_is_a_problem_naming_file_and_field(fake_model_dir: Path, name: str,
                                                                    change: Callable[[Any], Any],
                                                                    field: str) -> None:
    edit(fake_model_dir, name, change)
    result = check_model(fake_model_dir)
    assert any(str(fake_model_dir / name) in p and field in p for p in result.problems), result.problems


def test_a_layer_count_of_1e400_is_named(cli, fake_model_dir: Path) -> None:
    config = fake_model_dir / "config.json"
    config.write_text(config.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 1e400'))
    result = cli("models", "check", fake_model_dir, db=False)
    assert result.code == 1 and "Traceback" not in result.err + result.out
    assert "'num_hidden_layers' is the number Infinity" in " ".join(result.out.split())


# F11: a link loop is named as one, with its chain, not reported as missing.
@pytest.fixture
def loop(tmp_path: Path) -> Path:
    os.symlink("b", tmp_path / "a")
    os.symlink("a", tmp_path / "b")
    return tmp_path / "a"


def test_a_link_loop_is_named_by_check_import_and_verify(loop: Path) -> None:
    chain = "is a symbolic link loop (a -> b -> a)"
    problems = check_model(loop).problems
    assert len(problems) == 1 and chain in problems[0] and "does not exist" not in problems[0]
    with pytest.raises(UserError, match=r"symbolic link loop \(a -> b -> a\)"):
        inspect_gguf(loop)
    with pytest.raises(UserError, match=r"symbolic link loop \(a -> b -> a\)"):
        verify_model(loop)


def test_the_verify_command_names_a_loop_too(loop: Path, cli) -> None:
    """`models verify`'s own check of the path let no link through to verify_model: a loop was 'no such file'."""
    result = cli("models", "verify", loop, db=False)
    assert result.code == 1 and "symbolic link loop (a -> b -> a)" in result.err, result.err
    assert "no such file" not in result.err


def test_a_looping_entry_in_a_model_folder_is_named(fake_model_dir: Path) -> None:
    (fake_model_dir / "config.json").unlink()
    os.symlink("config.json", fake_model_dir / "config.json")
    problems = check_model(fake_model_dir).problems
    assert any("config.json" in p and "symbolic link loop" in p for p in problems), problems


# ---- sixth round ----------------------------------------------------------------------------------------------------
# H03: names and header text are shown with control characters escaped, line breaks included: a name cannot send an
# escape sequence to the terminal or forge an `error:` line.
FORGED = "evil\nerror: forged.gguf"


def test_a_file_name_with_a_line_break_stays_on_the_error_line(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("A2X_MODELS_DIR", str(tmp_path / "models"))
    bad = tmp_path / FORGED
    bad.write_bytes(b"GGUF" + struct.pack("<I", 1) + bytes(16))
    for args in (("models", "import", bad, "--name", "forged"), ("models", "verify", bad)):
        result = cli(*args, db=False)
        assert result.code == 1
        lines = result.err.splitlines()
        assert not any(line.startswith("error: forged") for line in lines), result.err
        assert "evil\\nerror: forged.gguf" in result.err, result.err


def test_the_import_step_line_escapes_the_file_name(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("A2X_MODELS_DIR", str(tmp_path / "models"))
    bad = tmp_path / "esc\x1b[31mred.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<I", 1) + bytes(16))
    result = cli("models", "import", bad, "--name", "red", db=False)
    assert result.code == 1 and "\x1b" not in result.err, repr(result.err)
    assert "import: reading the header of " in result.err and "esc\\x1b[31mred.gguf" in result.err


def test_a_header_architecture_with_a_line_break_is_escaped(tmp_path: Path) -> None:
    message = refused(tmp_path / "arch.gguf", header(1) + kv_text(b"general.architecture", b"x\nerror: fake line"))
    assert "\n" not in message and "'x\\nerror: fake line'" in message


def test_models_check_escapes_the_folder_name(cli, tmp_path: Path) -> None:
    folder = tmp_path / "e\x1b]0;TITLE\x07\x1b[2J\nerror: x"
    folder.mkdir()
    assert all("\x1b" not in p and "\n" not in p for p in check_model(folder).problems)
    result = cli("models", "check", folder, db=False)
    assert "\x1b" not in result.out + result.err, repr(result.out)
    assert not any(line.startswith("error: x") for line in (result.out + result.err).splitlines())
    assert "e\\x1b]0;TITLE\\x07\\x1b[2J\\nerror: x" in result.out, result.out


# H04: the reader's work is bounded: arrays capped where real vocabularies still fit (a 262k vocabulary is 3 arrays
# of 262,144), and a wrong architecture refused from the header walk, before the reader parses the file.
def test_the_caps_fit_real_vocabularies_and_bound_the_reader() -> None:
    assert 280_147 <= MAX_ARRAY <= 1 << 19          # Llama 3's merges fit; 2^20 strings took the reader 45 s
    assert 3 * 262_144 <= MAX_VALUES <= 1 << 20     # Gemma's three arrays fit


def test_a_million_empty_strings_are_refused_in_the_header_walk(tmp_path: Path) -> None:
    n = MAX_ARRAY + 1
    refused(tmp_path / "strings.gguf", header(2) + ARCH + kv_array(b"a", 8, n, bytes(8 * n)),
            ["'a'", f"over the limit of {MAX_ARRAY:,}"])


def test_arrays_over_the_total_are_refused(tmp_path: Path) -> None:
    n = MAX_ARRAY
    arrays = b"".join(kv_array(key, 8, n, bytes(8 * n)) for key in (b"a", b"b"))
    refused(tmp_path / "two.gguf", header(3) + ARCH + arrays, ["'b'", f"more than {MAX_VALUES:,} values"])


def test_an_unsupported_architecture_is_refused_before_the_reader(tmp_path: Path, monkeypatch) -> None:
    import gguf

    def no_reader(*_: Any, **__: Any) -> None:
        raise AssertionError("the gguf reader was reached")

    monkeypatch.setattr(gguf, "GGUFReader", no_reader)
    n = 100_000
    data = header(2) + kv_text(b"general.architecture", b"nosucharch") + kv_array(b"a", 8, n, bytes(8 * n))
    refused(tmp_path / "arch.gguf", data, ["architecture 'nosucharch' is not one"])
