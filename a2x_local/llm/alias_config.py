"""Adding a `[models."NAME"]` alias to the user's config.toml without disturbing the rest of it.

tomlkit keeps every comment, blank line and key order of the file; the file is rewritten whole (`write_output`), so a
reader never sees half of it. A file that does not parse is refused before anything is converted: the alias is never
added to a file the user must repair first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from a2x_local import extras
from a2x_local.errors import UserError
from a2x_local.outfiles import write_output
from a2x_local.settings import CONFIG_MAX_BYTES

HEADER = "# a2x-local configuration (docs/configuration.md). `a2x-local models import` adds aliases here.\n"


def _read(config_file: Path) -> Any:
    """The file as a tomlkit document (an empty one when the file does not exist)."""
    extras.require("tomlkit", feature="registering a model alias")
    import tomlkit
    from tomlkit.exceptions import ParseError

    from a2x_local.jsonfiles import read_bytes

    if not config_file.exists() and not config_file.is_symlink():
        return tomlkit.parse(HEADER)
    data = read_bytes(config_file, CONFIG_MAX_BYTES, what="configuration",
                      hint="the user configuration must be a regular file")
    try:
        return tomlkit.parse(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{config_file}: not UTF-8 text (byte {exc.start}); the model alias was not added",
                        hint="save the file as UTF-8, then run the import again") from exc
    except ParseError as exc:
        raise UserError(f"{config_file}: not valid TOML ({exc}); the model alias was not added",
                        hint="fix the file at the line named, then run the import again") from exc


def alias_in_config(config_file: Path, name: str) -> bool:
    """Whether the file defines `[models."NAME"]`; raises `UserError` when the file cannot be read or parsed."""
    document = _read(config_file)
    models = document.get("models")
    if models is not None and not hasattr(models, "get"):
        raise UserError(f"{config_file}: `models` is a single value, not a table; the model alias was not added",
                        hint='aliases are tables: [models."NAME"] with path = "..."')
    return models is not None and name in models


def add_alias(config_file: Path, name: str, table: dict[str, Any], *, replace: bool) -> None:
    """Write `[models."NAME"]` = ``table`` into the file, keeping everything else; refused when the alias is there
    already, unless ``replace``."""
    import tomlkit

    document = _read(config_file)
    if "models" not in document:
        document.add(tomlkit.nl())
        document["models"] = tomlkit.table(is_super_table=True)
    models = document["models"]
    if not hasattr(models, "get"):
        raise UserError(f"{config_file}: `models` is a single value, not a table; the model alias was not added",
                        hint='aliases are tables: [models."NAME"] with path = "..."')
    if name in models and not replace:
        raise UserError(f"{config_file} already has the alias [models.\"{name}\"]",
                        hint="pass --force to replace it, or choose another --name")
    from tomlkit.items import InlineTable

    inline = isinstance(models, InlineTable)      # `models = { ... }`: its entries must be inline too
    entry = tomlkit.inline_table() if inline else tomlkit.table()
    for key, value in table.items():
        if value is not None:
            entry[key] = value
    if not inline:
        entry.add(tomlkit.nl())                   # a blank line before whatever table follows
    models[name] = entry
    write_output(config_file, tomlkit.dumps(document), what="configuration file")
