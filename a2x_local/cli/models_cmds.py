"""`a2x-local models list|check|import|make-tiny|pack|verify`: what models are configured, which are present, what
is missing, converting GGUF files into model folders, and carrying a model folder across an air gap with a manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.table import Table

from a2x_local import provenance
from a2x_local.cli.options import JsonOption, settings_for, with_engine_options
from a2x_local.cli.output import console, err_console, print_json, progress_reporter, shown, shown_inline
from a2x_local.delivery import ModelToPack, check_model_name, pack_model, verify_model
from a2x_local.errors import UserError
from a2x_local.llm import (
    ALIASES_FILE,
    IMPORT_DTYPES,
    EngineOptions,
    ImportOutcome,
    ModelCheck,
    alias_path,
    build_tiny_model,
    check_ref,
    engine_settings,
    ensure_model,
    import_alias,
    import_file,
    load_aliases,
)
from a2x_local.settings import Settings

# This module's commands; the composition root (cli/app.py) adds them to the application.
commands = typer.Typer()

models_app = typer.Typer(help="Local models: what is configured, what is present, what is missing.",
                         no_args_is_help=True)
commands.add_typer(models_app, name="models")


@models_app.command("list")
def list_command(ctx: typer.Context, json_output: JsonOption = False) -> None:
    """List the model aliases (packaged and your own) and whether their folders are present.

    Example: a2x-local models list --json
    """
    settings = settings_for(ctx)
    rows = []
    for name, entry in load_aliases(settings).items():
        path = alias_path(settings, entry)
        rows.append({"alias": name, "path": str(path), "present": (path / "config.json").is_file(),
                     "source": entry.source, "dtype": entry.dtype, "max_model_len": entry.max_model_len,
                     "tensor_parallel_size": entry.tensor_parallel_size, "quantization": entry.quantization,
                     "gpu_memory_gb": entry.gpu_memory_gb, "license": entry.license, "sha256": entry.sha256,
                     "gguf_package": entry.gguf_package, "description": entry.description})
    if json_output:
        print_json({"models_dir": str(settings.models_dir), "aliases_file": ALIASES_FILE, "models": rows})
        return
    table = Table(title=f"Model aliases ({ALIASES_FILE} and your config)", box=box.SIMPLE_HEAD)
    for column in ("alias", "present", "dtype", "context", "GPUs", "GPU GB"):
        table.add_column(column, justify="right" if column in ("context", "GPUs", "GPU GB") else "left",
                         no_wrap=True, overflow="ellipsis")
    for row in rows:
        table.add_row(row["alias"], "[green]yes[/green]" if row["present"] else "[red]no[/red]", row["dtype"] or "",
                      f"{row['max_model_len'] or ''}", f"{row['tensor_parallel_size'] or ''}",
                      f"{row['gpu_memory_gb'] or ''}")
    console.print(table)
    console.print(f"Folders live under {settings.models_dir} ($A2X_MODELS_DIR); --json shows each path.",
                  highlight=False)
    console.print("Check one with `a2x-local models check ALIAS`; bring weights in as models/README.md explains.")


@models_app.command("check")
@with_engine_options(exclude=("model",))
def check_command(
    ctx: typer.Context,
    model: Annotated[str, typer.Argument(metavar="ALIAS|PATH", help="Model alias or folder.")],
    json_output: JsonOption = False,
    engine_options: EngineOptions = None,  # type: ignore[assignment]  (filled by with_engine_options)
) -> None:
    """Check that a model's files are present and loadable (config, tokenizer, weights) and estimate its GPU memory.

    Reads only file headers: no weights are loaded and nothing is downloaded. Exits 1 when something is missing.

    Example: a2x-local models check qwen2.5-7b --max-model-len 16384
    """
    settings = settings_for(ctx)
    ref, config = engine_settings(settings, engine_options.model_copy(update={"model": model}), must_exist=False)
    result = check_ref(ref, config)
    if json_output:
        print_json(result.to_dict())
    else:
        _print_check(result)
    if not result.ok:
        raise typer.Exit(1)


def _print_check(result: ModelCheck) -> None:
    # The folder's name is the operator's or the archive's, the config's values the file's: shown escaped.
    name = f"{result.alias} -> {result.path}" if result.alias else str(result.path)
    console.print(f"[bold]{shown_inline(name)}[/bold]", highlight=False)
    if result.architecture:
        size = _count(result.parameters) + " parameters" if result.parameters else "parameters unknown"
        console.print(f"  {shown_inline(result.architecture)}, {size} ({shown_inline(result.stored_dtype or '?')}), "
                      f"{result.weight_files} "
                      f"weight file(s), {_count(result.weight_bytes)}B; chat template: "
                      f"{'yes' if result.has_chat_template else 'no'}", highlight=False)
    memory = result.memory
    if memory:
        console.print(
            f"  GPU memory at max_model_len {memory.max_model_len:,} ({memory.dtype}, {memory.tensor_parallel_size} "
            f"GPU): weights {memory.weights_gib} GiB + KV cache {memory.kv_cache_gib_at_max_len} GiB "
            f"({memory.kv_cache_kib_per_token} KiB/token) + runtime ~{memory.overhead_gib:g} GiB/GPU "
            f"= ~{memory.total_gib} GiB ({memory.per_gpu_gib} GiB per GPU)", highlight=False)
    for warning in result.warnings:
        console.print(f"  [yellow]warning:[/yellow] {shown_inline(warning)}", highlight=False)
    for problem in result.problems:
        console.print(f"  [red]missing:[/red] {shown_inline(problem)}", highlight=False)
    console.print("  [green]ready[/green]" if result.ok else
                  f"  [red]not usable[/red]: {len(result.problems)} problem(s); see models/README.md")


def _count(number: int) -> str:
    return f"{number / 1e9:.2f} G" if number >= 1e9 else f"{number / 1e6:.1f} M"


@models_app.command("import")
def import_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", metavar="ALIAS", show_default=False,
                                      help="The alias, and the model folder's name in the models folder.")],
    file: Annotated[Path | None, typer.Argument(metavar="FILE.gguf", show_default=False,
                                                help="The GGUF file (one whole file, not a split part). Leave it "
                                                     "out for an alias whose GGUF ships as a package.")] = None,
    dtype: Annotated[str, typer.Option("--weights-dtype", metavar="|".join(IMPORT_DTYPES),
                                       help="Weights as written: float32 keeps the dequantized values exactly and "
                                            "suits CPUs; bfloat16 halves the folder for a GPU.")] = "float32",
    source: Annotated[str | None, typer.Option("--source", metavar="TEXT", show_default=False,
                                               help="Where the file came from, recorded with the alias (default: "
                                                    "the file's path), e.g. a Hugging Face repository.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing folder and alias of that name.")]
    = False,
    json_output: JsonOption = False,
) -> None:
    """Convert a GGUF file (the usual format of downloaded open weights) into a model folder the vllm and
    transformers engines load, and register ALIAS in your config.toml.

    transformers reads the file and dequantizes it (about a minute per 100 MB of GGUF on 2 cores); the folder is
    written whole under the models folder or not at all, passes `models check`, and records the file's SHA-256,
    quantization and source (a2x-gguf-import.json). Split files, files that are not GGUF, truncated files and
    architectures transformers cannot read are refused first. Without FILE, an alias whose GGUF ships as a
    package (smollm2-135m) is imported from the installed package; commands given --model ALIAS do that on first
    use anyway.

    Example: a2x-local models import ~/Downloads/qwen2.5-0.5b-instruct-q8_0.gguf --name qwen-small
    """
    settings = settings_for(ctx)

    def step(text: str) -> None:
        if not json_output:
            err_console.print(f"import: {shown_inline(text)}", highlight=False)   # it names the file as given

    if file is None:
        outcome = import_alias(settings, name, force=force, step=step)
    else:
        outcome = import_file(settings, file, name, dtype=dtype, source=source, force=force, step=step)
    if json_output:
        print_json(outcome.to_dict())
    else:
        _print_import(outcome)


def _print_import(outcome: ImportOutcome) -> None:
    report = outcome.report
    if report is None:
        console.print(f"{outcome.alias}: already imported at {outcome.folder}", highlight=False)
        return
    console.print(f"wrote {shown_inline(report.folder)} ({_megabytes(report.bytes)}, {report.dtype}) from "
                  f"{shown_inline(report.gguf.path.name)} ({shown_inline(report.gguf.architecture)}, "
                  f"{report.gguf.quantization}) in "
                  f"{report.seconds:.0f} s; SHA-256 {report.sha256}", highlight=False)
    if outcome.config_file:
        console.print(f"alias {outcome.alias} added to {outcome.config_file}", highlight=False)
    console.print(f"use it: a2x-local models check {outcome.alias}; a2x-local build --model {outcome.alias}",
                  highlight=False)


@models_app.command("make-tiny")
def make_tiny_command(
    path: Annotated[Path, typer.Argument(metavar="PATH", help="Folder to write the model into (must not exist "
                                         "or be empty).")],
    json_output: JsonOption = False,
) -> None:
    """Write a tiny random-weight Qwen2 chat model (~4 MB, seconds, offline) for smoke-testing an install.

    Its answers are nonsense but satisfy every constraint, so `build`, `search` and `eval` run end to end on any
    machine: use it to check the engines work, never to build a tree anyone searches.

    Example: a2x-local models make-tiny /tmp/tiny && a2x-local models check /tmp/tiny
    """
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UserError(f"{path} already exists and is not an empty folder", hint="choose a new folder")
    build_tiny_model(path)
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    if json_output:
        print_json({"path": str(path.resolve()), "bytes": size})
    else:
        console.print(f"wrote a tiny random-weight model to {path} ({size / 2**20:.1f} MB); its answers are nonsense",
                      highlight=False)


def model_to_pack(settings: Settings, options: EngineOptions, name: str | None) -> ModelToPack:
    """Resolve the model, run `models check` on it under the given settings, and refuse an unusable one."""
    if name is not None:
        check_model_name(name)   # before the check: a bad name fails at once
    ref, config = engine_settings(settings, options, must_exist=True)
    ensure_model(ref, step=lambda text: err_console.print(shown_inline(text), highlight=False))
    check = check_ref(ref, config)
    if not check.ok:
        raise UserError(f"model '{ref.requested}' at {ref.path} is not usable: " + " ".join(check.problems),
                        hint=f"run `a2x-local models check {ref.requested}`; only a model that passes is packed")
    checked = {"engine": {key: getattr(config, key) for key in ("dtype", "max_model_len", "tensor_parallel_size",
                                                                "quantization")},
               "check": {key: value for key, value in check.to_dict().items() if key not in ("path", "target")},
               "checked_by": provenance.current().describe()}
    # The folder's own name by default: unpacked into the models folder, it is where the alias looks.
    return ModelToPack(ref.path, check_model_name(name or ref.path.name, "the model folder's name"), ref.alias,
                       checked)


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
    to_pack = model_to_pack(settings, engine_options.model_copy(update={"model": model}), name)
    with progress_reporter(json_output, "models") as bars:
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
    if not path.exists() and not path.is_symlink():     # a link loop: verify_model names it
        raise UserError(f"{path}: no such file or folder", hint="give the archive or the unpacked model "
                        "folder")
    with progress_reporter(json_output, "models") as bars:
        report = verify_model(path, bars)
    if json_output:
        print_json(report.to_dict())
    else:
        alias = f" (alias {shown(report.alias)})" if report.alias else ""
        console.print(f"[bold]{shown(report.name)}[/bold]{alias}: {report.files} files, "
                      f"{report.bytes / 2**30:.2f} GiB checked", highlight=False)
        # Names come from the archive: shown escaped, never as markup or terminal control sequences.
        for warning in report.warnings:
            console.print(f"  [yellow]warning:[/yellow] {shown(warning)}", highlight=False)
        if report.more_warnings:
            console.print(f"  [yellow]warning:[/yellow] and {report.more_warnings:,} more", highlight=False)
        for problem in report.problems:
            console.print(f"  [red]bad:[/red] {shown(problem)}", highlight=False)
        if report.more_problems:
            console.print(f"  [red]bad:[/red] and {report.more_problems:,} more, not listed", highlight=False)
        total = len(report.problems) + report.more_problems
        console.print("  [green]intact[/green]" if report.ok else f"  [red]{total:,} problem(s)[/red]: "
                      "copy the archive again from the connected machine")
    if not report.ok:
        raise typer.Exit(1)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size < 10e6 else f"{size / 1e6:,.0f} MB"
