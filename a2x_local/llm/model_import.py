"""`a2x-local models import`: a GGUF file -> a model folder in the models folder and an alias in the user's config;
or, with no file, a packaged alias's GGUF (`smollm2-135m`) -> its folder.

Everything that can be refused is refused before the minute of conversion: the name, the user's config file (it
must parse: the alias is added to it at the end), an existing folder or alias (unless `force`), and the file itself
(`inspect_gguf`: split parts, no GGUF, truncated, an architecture transformers' loader lacks).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from a2x_local.errors import UserError
from a2x_local.llm.alias_config import add_alias, alias_in_config
from a2x_local.llm.gguf_file import inspect_gguf, sha256_of
from a2x_local.llm.gguf_import import (
    ImportReport,
    Step,
    check_dtype,
    check_name,
    folder_lock,
    heartbeat,
    write_model_folder,
)
from a2x_local.llm.models import alias_path, load_aliases
from a2x_local.llm.packaged_models import import_packaged, is_packaged
from a2x_local.settings import Settings, packaged_file


@dataclass
class ImportOutcome:
    """What `models import` did: the report of the conversion (None when the folder was there already)."""

    alias: str
    folder: Path
    report: ImportReport | None
    config_file: Path | None = None      # where the alias was registered (a user import)

    def to_dict(self) -> dict[str, object]:
        return {"alias": self.alias, "path": str(self.folder), "imported": self.report is not None,
                "config_file": str(self.config_file) if self.config_file else None,
                **(self.report.to_dict() if self.report else {})}


def import_alias(settings: Settings, name: str, *, force: bool = False, step: Step = lambda _: None) -> ImportOutcome:
    """A packaged alias whose GGUF ships as a package: import its folder (once; again with ``force``)."""
    aliases = load_aliases(settings)
    entry = aliases.get(name)
    if entry is None or not is_packaged(entry):
        shipped = ", ".join(alias for alias, item in aliases.items() if is_packaged(item)) or "none"
        give = (f"'{name}' loads a folder you bring (models/README.md); to import a GGUF file, give the file and a "
                "name of your own: a2x-local models import FILE.gguf --name my-model" if entry is not None else
                f"give the file: a2x-local models import FILE.gguf --name {name}")
        raise UserError(f"no GGUF file given, and '{name}' is not an alias whose GGUF ships as a package",
                        hint=f"{give}; aliases that import without a file: {shipped}")
    folder = alias_path(settings, entry)
    report = import_packaged(name, entry, folder, step=step, force=force)
    return ImportOutcome(name, folder, report)


def import_file(settings: Settings, path: Path, name: str, *, dtype: str = "float32", source: str | None = None,
                force: bool = False, step: Step = lambda _: None) -> ImportOutcome:
    """Convert the GGUF at ``path`` into `models_dir/NAME` and register `[models."NAME"]` in the user's config."""
    check_name(name)
    check_dtype(dtype)
    if name in packaged_file("models.toml").get("models", {}):
        hint = (f"import it without a file: a2x-local models import --name {name}"
                if is_packaged(load_aliases(settings).get(name)) else "choose another --name")
        raise UserError(f"'{name}' is an alias that ships with a2x-local; your import needs a name of its own",
                        hint=hint)
    config_file = settings.home / "config.toml"
    if alias_in_config(config_file, name) and not force:
        raise UserError(f"{config_file} already has the alias [models.\"{name}\"]",
                        hint="pass --force to replace it (and its folder), or choose another --name")
    folder = settings.models_dir / name
    if folder.exists() and not force:
        raise UserError(f"{folder} already exists", hint="pass --force to replace it, or choose another --name")
    step(f"reading the header of {path}")
    info = inspect_gguf(path)
    step(f"{info.architecture}, {info.quantization}, {info.tensors} tensors, {_megabytes(info.bytes)}; "
         "computing its SHA-256")
    with heartbeat(step, "computing the SHA-256"):
        digest = sha256_of(info.path)
    with folder_lock(folder, wait_s=0, step=step):
        report = write_model_folder(info, digest, folder, dtype=dtype, source=source or str(info.path),
                                    replace=force, step=step)
    description = f"imported from {info.path.name} ({info.architecture}, {info.quantization}) by models import"
    add_alias(config_file, name, {"path": name, "source": report.source, "description": description,
                                  "sha256": digest, "dtype": dtype}, replace=True)
    step(f"registered the alias {name} in {config_file}")
    return ImportOutcome(name, folder, report, config_file)


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size < 10e6 else f"{size / 1e6:,.0f} MB"
