"""`a2x-local models pack|verify` on the tiny random model: the manifest records the alias and the settings the
folder passed `models check` under, verify exits 1 naming a damaged file, and an unusable folder is not packed."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path


def test_pack_records_the_check_settings_and_verify_passes(cli, tiny_model_dir: Path, tmp_path: Path):
    result = cli("models", "pack", tiny_model_dir, "--out", tmp_path / "out", "--max-model-len", "512",
                 "--dtype", "float32", "--json", db=False)
    assert result.code == 0, result.err
    archive = Path(result.json()["archive"])
    manifest = json.loads((tmp_path / "out" / "tiny-qwen2.manifest.json").read_text())
    assert manifest["name"] == "tiny-qwen2" and manifest["alias"] is None
    assert manifest["checked_with"]["engine"]["max_model_len"] == 512
    assert manifest["checked_with"]["engine"]["dtype"] == "float32"
    assert manifest["checked_with"]["check"]["ok"] is True
    assert manifest["checked_with"]["checked_by"].startswith("a2x-local ")
    assert {f["path"] for f in manifest["files"]} >= {"config.json", "model.safetensors"}

    verified = cli("models", "verify", archive, "--json", db=False)
    assert verified.code == 0 and verified.json()["ok"] is True, verified.out

    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "far", filter="data")
    unpacked = tmp_path / "far" / "tiny-qwen2"
    (unpacked / "config.json").write_text("{}")
    damaged = cli("models", "verify", unpacked, db=False)
    assert damaged.code == 1
    assert "config.json" in damaged.out and "problem" in damaged.out, damaged.out


def test_pack_refuses_a_model_that_fails_the_check(cli, tiny_model_dir: Path, tmp_path: Path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "model.safetensors").unlink()
    result = cli("models", "pack", broken, "--out", tmp_path / "out", db=False)
    assert result.code == 1
    assert "not usable" in result.err and "hint:" in result.err, result.err
    assert not (tmp_path / "out").exists()


def test_verify_of_a_missing_path_is_a_user_error(cli, tmp_path: Path):
    result = cli("models", "verify", tmp_path / "nothing.tar", db=False)
    assert result.code == 1 and "no such file" in result.err


def test_pack_refuses_a_name_that_leaves_out_before_any_work(cli, tiny_model_dir: Path, tmp_path: Path):
    """Issue 32, finding 13: `--name ../escaped` wrote outside --out, `a/b` failed with a raw OS error."""
    for name in ("../escaped", "a/b"):
        result = cli("models", "pack", tiny_model_dir, "--out", tmp_path / "out", "--name", name, db=False)
        assert result.code == 1 and "model name" in result.err and "hint:" in result.err, result.err
        assert "this is a bug" not in result.err
    assert not (tmp_path / "escaped.tar").exists() and not (tmp_path / "out").exists()


def test_verify_of_a_hostile_archive_exits_1_with_names_escaped(cli, tmp_path: Path):
    """A member named with a terminal escape and rich markup is shown escaped; the archive is not intact."""
    import hashlib
    import io

    archive = tmp_path / "m.tar"
    config = b"{}"
    listed = {"path": "config.json", "bytes": 2, "sha256": hashlib.sha256(config).hexdigest()}
    manifest = {"format": "a2x-model-pack", "version": 1, "name": "m", "alias": None, "checked_with": {},
                "files": [listed],
                "total_bytes": 2}
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("m/config.json", config), ("m/\x1b[2J[red]x[/red].bin", b"x"),
                           ("m/a2x-model-manifest.json", json.dumps(manifest).encode())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    result = cli("models", "verify", archive, db=False)
    assert result.code == 1, result.out + result.err
    assert "\x1b" not in result.out and "\\x1b[2J[red]x[/red].bin" in result.out, result.out
    assert "this is a bug" not in result.err
