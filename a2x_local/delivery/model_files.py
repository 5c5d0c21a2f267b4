"""What a packed model may hold, and the walk of a model folder that finds it.

A model folder is regular files and folders. The walk never follows a link to a folder (a link to `.` or `..`
would loop), refuses a link that leaves the model folder, any file that is not a regular one (a named pipe
blocks a reader, a device never ends) and a sparse file (a 1 TiB file of holes costs nothing to make and half an
hour to hash), and stops at `MAX_FILES`: `models pack` refuses what it finds, `models verify` reports it.
Names and paths follow one rule on both sides: the archive's folder is one plain path segment that fits a file
name with the suffixes a pack adds (`NAME_MAX_BYTES` of UTF-8), and every path inside it is relative, without `.`,
`..` or empty parts, control characters or bytes that are not UTF-8, so nothing can land outside `NAME/` and what
`models pack` writes its own `models verify` accepts.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from a2x_local.errors import UserError
from a2x_local.outfiles import kind_of
from a2x_local.text import id_problem, quoted

MANIFEST = "a2x-model-manifest.json"
# A model holds tens to a few hundred files (shards, tokenizer, configs); the bound keeps a hostile archive or
# folder of a million empty entries from tying a check up.
MAX_FILES = 10_000
NAME_MAX_CHARS = 200
# A file name holds at most 255 bytes (ext4, xfs, btrfs); a pack writes NAME.manifest.json.partial beside the archive.
NAME_MAX_BYTES = 255 - len(".manifest.json.partial")
# Below this size a file is never called sparse: small files may have no blocks of their own (btrfs keeps them inline).
SPARSE_MIN_BYTES = 1 << 20
# The hub's download bookkeeping (`hf download --local-dir` writes .cache/huggingface/): not part of the model.
SKIPPED_DIRS = frozenset({".cache"})
NAME_HINT = ("give --name one folder name, e.g. Qwen2.5-7B-Instruct (no '/', no leading '.' or '-', at most 200 "
             "characters and 233 bytes of UTF-8)")

# What makes a file part of the model (a folder whose such files are not all in its manifest is not intact).
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf", ".h5", ".msgpack", ".onnx", ".npz")
_MODEL_NAMES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                "tokenizer.model", "special_tokens_map.json", "added_tokens.json", "vocab.json", "vocab.txt",
                "merges.txt", "chat_template.json", "chat_template.jinja", "preprocessor_config.json")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a packed model's archive and folder (one plain path segment), else None."""
    if not name.strip():
        return "is empty"
    if len(name) > NAME_MAX_CHARS:
        return f"is longer than {NAME_MAX_CHARS} characters"
    if "/" in name or "\\" in name:
        return "holds a '/' or '\\': it must be one folder name, not a path"
    if name[0] in ".-":
        return "starts with '.' or '-' ('..' leaves the folder, a dot hides it, a dash reads as an option)"
    problem = id_problem(name)
    if problem is not None:
        return problem
    size = len(name.encode("utf-8"))
    if size > NAME_MAX_BYTES:
        return (f"is {size} bytes in UTF-8, over the {NAME_MAX_BYTES} a file name leaves it (255 bytes, less the "
                "'.manifest.json.partial' a pack adds)")
    return None


def check_name(name: str, where: str = "model name") -> str:
    problem = name_problem(name)
    if problem is not None:
        raise UserError(f"{where} {quoted(name[:NAME_MAX_CHARS])} {problem}", hint=NAME_HINT, code="BadModelName")
    return name


def path_problem(rel: str) -> str | None:
    """Why ``rel`` cannot be a path inside a packed model (absolute, `..`, `.` or empty parts, control
    characters), else None."""
    if not rel or rel.startswith("/"):
        return "is not a relative path inside the model folder"
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "has '..', '.' or empty parts: it must stay strictly inside the model folder"
    return id_problem(rel)


def is_model_file(rel: str) -> bool:
    """Whether a file is part of the model proper (config, weights, tokenizer) rather than a note beside it."""
    name = PurePosixPath(rel).name.lower()
    return name in _MODEL_NAMES or name.endswith(_WEIGHT_SUFFIXES) or name.startswith("tokenizer")


def is_weight_file(rel: str) -> bool:
    return PurePosixPath(rel).name.lower().endswith(_WEIGHT_SUFFIXES)


@dataclass
class FolderWalk:
    """The regular files of a model folder (relative POSIX paths, sorted) and what the walk refused."""

    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    refused: set[str] = field(default_factory=set)     # the paths a problem names (not listed again as missing)


def walk_model(folder: Path, *, limit: int = MAX_FILES) -> FolderWalk:
    """Every regular file of the model folder (a link to a file inside it counts as that file), the hub's .cache
    and the manifest left out; links to folders, links that leave the folder and special files are problems."""
    root = os.path.realpath(folder)
    walk = FolderWalk()
    pending: list[tuple[str, str]] = [(root, "")]
    seen = 0
    while pending:
        where, prefix = pending.pop()
        try:
            entries = sorted(os.scandir(where), key=lambda e: e.name)
        except OSError as exc:
            walk.problems.append(f"{prefix or '.'}: cannot be listed ({exc.strerror or exc})")
            continue
        for item in entries:
            rel = f"{prefix}{item.name}"
            if (not prefix and item.name == MANIFEST) or (not prefix and item.name in SKIPPED_DIRS
                                                          and item.is_dir(follow_symlinks=False)):
                continue
            seen += 1
            if seen > limit:
                walk.problems.append(f"the folder holds more than {limit:,} files and folders; a model holds a few "
                                     "hundred at most")
                return walk
            problem = _name_problem(rel) or _entry_problem(item, rel, root)
            if problem is not None:
                walk.problems.append(problem)
                walk.refused.add(rel)
            elif item.is_dir(follow_symlinks=False):
                pending.append((item.path, f"{rel}/"))
            else:
                walk.files.append(rel)
    walk.files.sort()
    return walk


def _name_problem(rel: str) -> str | None:
    """Why a path found in the folder cannot be a path of a packed model (a line break, a control character, bytes
    that are not UTF-8: the manifest could not hold it, or verify would refuse it), shown escaped."""
    problem = path_problem(rel)
    if problem is None:
        return None
    if any(0xDC80 <= ord(char) <= 0xDCFF for char in rel):
        problem = "its name is not UTF-8 text (a manifest holds only UTF-8 names)"
    return f"{quoted(rel)}: {problem}; rename it"


def _entry_problem(item: os.DirEntry[str], rel: str, root: str) -> str | None:
    """Why one folder entry cannot be part of a model, else None (a folder, a regular file, or a link to a regular
    file inside the model folder)."""
    try:
        if not item.is_symlink():
            info = item.stat(follow_symlinks=False)
            if stat.S_ISREG(info.st_mode):
                return sparse_problem(item.path, info, rel)
            return None if stat.S_ISDIR(info.st_mode) else f"{rel}: is {kind_of(info.st_mode)}, not a regular file"
        target = os.path.realpath(item.path)
        if os.path.commonpath([root, target]) != root:
            return f"{rel}: a link to {target}, outside the model folder (links are never followed out of it)"
        info = os.stat(target)
        mode = info.st_mode
    except FileNotFoundError:
        return f"{rel}: a broken link"
    except OSError as exc:
        # ELOOP: a link that leads back to itself.
        return f"{rel}: cannot be read ({exc.strerror or exc}; a link loop?)"
    if stat.S_ISDIR(mode):
        return f"{rel}: a link to a folder, not followed (it may loop); copy the folder in its place"
    if not stat.S_ISREG(mode):
        return f"{rel}: a link to {kind_of(mode)}, not a regular file"
    return sparse_problem(target, info, rel)


def sparse_problem(file: str | int, info: os.stat_result, rel: str) -> str | None:
    """Why a regular file (a path or an open descriptor, with its stat) is sparse, else None.

    Sparse: less than half its size on disk and a hole the file system reports (SEEK_HOLE). Both, because each
    alone misleads: a compressing file system (ZFS, btrfs) stores a file in fewer blocks than its size and some
    FUSE mounts report no blocks at all, while holes are what make a huge file cost nothing. Weights are written
    whole, so a file with holes is damaged (an interrupted download) or made to tie a hash up for hours; it is
    refused before a byte is read, and `models verify` answers in seconds whatever size a file claims."""
    hole = hole_at(file, info)
    if hole is None:
        return None
    return (f"{rel}: a sparse file ({info.st_size:,} bytes, {info.st_blocks * 512:,} of them on disk, a hole at byte "
            f"{hole:,}); model files are written whole, so this one is damaged (an interrupted copy?) or planted; "
            "not read")


def hole_at(file: str | int, info: os.stat_result) -> int | None:
    """Where the first hole of a sparse regular file lies (see `sparse_problem`), else None."""
    on_disk = info.st_blocks * 512
    if info.st_size < SPARSE_MIN_BYTES or on_disk * 2 >= info.st_size:
        return None
    try:
        fd = file if isinstance(file, int) else os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None                   # not readable: the reader that opens it next says why
    try:
        position = os.lseek(fd, 0, os.SEEK_CUR) if isinstance(file, int) else 0
        hole = os.lseek(fd, 0, os.SEEK_HOLE)
        if isinstance(file, int):
            os.lseek(fd, position, os.SEEK_SET)
    except OSError:
        return None                   # the file system cannot tell: few blocks alone prove nothing
    finally:
        if not isinstance(file, int):
            os.close(fd)
    return hole if hole < info.st_size else None


def inside(folder: Path, rel: str) -> Path | None:
    """``folder/rel`` when it resolves (links included) to a place strictly inside ``folder``, else None."""
    root = os.path.realpath(folder)
    target = os.path.realpath(os.path.join(root, rel))
    return Path(target) if target != root and os.path.commonpath([root, target]) == root else None
