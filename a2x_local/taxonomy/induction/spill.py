"""A finished round that the database would not take is kept in a file beside it, and `build --resume` reads it.

A checkpoint write can fail after the work is done: another process held the registry past the wait, the disk
filled, the file became read-only. Hours of model time must not vanish with it, so the state goes to
``<db>.build-<id>.round.json`` (written whole, then renamed into place), and resume picks whichever of it and the
database's own checkpoint is further along.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from a2x_local.errors import InputError, UserError
from a2x_local.jsonfiles import read_json
from a2x_local.outfiles import write_output


def spill_path(db_path: Path, build_id: int) -> Path:
    return Path(f"{db_path}.build-{build_id}.round.json")


def write_spill(db_path: Path, build_id: int, round_no: int, stage: str, state: dict[str, Any]) -> Path | None:
    """Keep a round's state in a file; returns its path, or None when even that cannot be written."""
    path = spill_path(db_path, build_id)
    text = json.dumps({"build_id": build_id, "round": round_no, "stage": stage, "state": state})
    try:
        write_output(path, text, what="kept round")
    except UserError:
        return None
    return path


def read_spill(db_path: Path, build_id: int) -> tuple[int, str, dict[str, Any]] | None:
    """(round, stage, state) kept for this build, or None."""
    path = spill_path(db_path, build_id)
    if not path.is_file():
        return None
    try:
        data = read_json(path)
        if data["build_id"] != build_id:
            raise ValueError(f"it belongs to build {data['build_id']}")
        return int(data["round"]), str(data["stage"]), dict(data["state"])
    except (InputError, ValueError, KeyError, TypeError) as exc:
        reason = exc.message if isinstance(exc, InputError) else exc
        raise UserError(f"{path}: the kept round of build {build_id} cannot be read: {reason}",
                        hint="move the file aside to resume from the database's last checkpoint instead") from exc


def remove_spill(db_path: Path, build_id: int) -> None:
    spill_path(db_path, build_id).unlink(missing_ok=True)
