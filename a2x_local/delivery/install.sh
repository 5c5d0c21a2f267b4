#!/usr/bin/env bash
# Install this offline bundle of a2x-local into a virtual environment, from the bundle's files only.
#
#   ./install.sh VENV [--registry DB] [--force]
#
# VENV and DB are taken from the folder you run it from (not the bundle's); an empty path or one holding a control
# character is refused. Everything below is checked before anything is made or changed.
# 1. checks the whole bundle first: every file SHA256SUMS lists is a regular file inside it (no link on the way) and
#    matches; wheels/ is a folder holding nothing SHA256SUMS does not list by its exact path; the locks hold only
#    comments and `NAME==VERSION --hash=sha256:HEX` lines (no pip option, URL or path);
# 2. VENV must be new, empty, or a virtual environment a bundle installed into before (it holds the marker
#    a2x-local-bundle.txt, exactly as this script writes it); --force installs into any other folder (nothing in
#    it is removed); a VENV that is a link is refused;
# 3. creates VENV with Python 3.11 when it does not exist ($A2X_PYTHON names the interpreter);
# 4. installs the locked wheels with `pip --no-index --no-deps --require-hashes` (pip's own configuration and PIP_*
#    variables are ignored, so no index or other folder is ever consulted), then a2x-local itself;
# 5. over an earlier bundle's install (an upgrade), removes what that bundle installed and this one does not carry
#    (only packages its marker lists, still at the version it lists), then writes the marker, which lists only
#    packages this bundle carries that were absent before it ran or that the earlier marker listed;
# 6. with --registry DB (a regular file, or a link to one in its own folder; its .wal a regular file or absent):
#    copies DB to DB.before-BUNDLE_ID (never over one already there), then opens it once with the new a2x-local,
#    which applies the registry's migrations and records this bundle in its history (`a2x-local stats --db DB`).
# Stop any a2x-local process that uses the registry (serve, nightly) before an upgrade, and start it again after.
set -euo pipefail

MARKER="a2x-local-bundle.txt"
usage() { echo "usage: $0 VENV [--registry DB] [--force]" >&2; exit 2; }
fail() { echo "install: error: $1" >&2; [ -n "${2:-}" ] && echo "install: hint: $2" >&2; exit 1; }

[ $# -ge 1 ] || usage
case "$1" in -h|--help) sed -n '2,23p' "$0"; exit 0 ;; -*) usage ;; esac
venv="$1"; shift
registry=""
registry_given=""
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --registry) [ $# -ge 2 ] || usage; registry="$2"; registry_given=1; shift 2 ;;
    --force) force=1; shift ;;
    *) usage ;;
  esac
done

# --- 0. the arguments: checked, and made absolute from the folder install.sh was run from, before any cd --------
# A control character (a line break, a tab, an escape) is in no path an operator means to give; an empty one is an
# unset variable ("$VENV"): `python -m venv ""` would make the environment in the current folder, and "$venv/bin/python"
# would be /bin/python, the system's own interpreter.
control="$(printf '\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017\020\021\022\023\024\025\026\027\030\031\032\033\034\035\036\037\177.')"
control="${control%.}"
ran_from=""
absolute() {  # absolute WHAT PATH: sets $resolved to PATH, relative to the folder install.sh was run from
  local what="$1" path="$2"
  [ -n "$path" ] || fail "$what is empty (an unset variable?); nothing was made" "give the path itself: $3"
  if [[ "$path" == *[$control]* ]]; then
    fail "$what $(printf '%q' "$path") holds a control character (a line break, a tab, an escape); nothing was made" \
      "give a path without one: $3"
  fi
  if [[ "$path" != /* ]]; then
    if [ -z "$ran_from" ]; then
      ran_from="$(pwd -P 2>/dev/null && echo .)" && ran_from="${ran_from%$'\n.'}" && [ -n "$ran_from" ] \
        || fail "the folder install.sh was run from cannot be found (removed?), so $what $path means nothing" \
          "give an absolute path, or run install.sh from an existing folder"
    fi
    path="${ran_from%/}/$path"
    [[ "$path" != *[$control]* ]] \
      || fail "$what $(printf '%q' "$path") (from the folder install.sh was run from) holds a control character" \
        "give an absolute path without one: $3"
    echo "install: $what $2 is $path (a relative path is taken from the folder install.sh was run from)" >&2
  fi
  resolved="$path"
}
absolute VENV "$venv" "./install.sh /opt/a2x-local/venv"; venv="$resolved"
if [ -n "$registry_given" ]; then
  absolute "--registry" "$registry" "--registry /var/lib/a2x-local/registry.duckdb"; registry="$resolved"
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# --- 1. the bundle: checked whole before anything is created ----------------------------------------------------
copy_again="copy the bundle again from its source"
max_text=$((4 * 1024 * 1024))   # SHA256SUMS, the locks, BUNDLE_ID, PLATFORM: a few KiB in any real bundle
for file in SHA256SUMS BUNDLE_ID PLATFORM requirements.lock project.lock install.sh; do
  # A link or a special file would be read in place of the bundle's own (a named pipe blocks, a device never ends).
  [ -f "$file" ] && [ ! -L "$file" ] || fail "$here/$file is missing or not a regular file" "$copy_again"
  [ "$(stat -c %s -- "$file")" -le "$max_text" ] \
    || fail "$here/$file holds more than $max_text bytes, which no bundle writes" "$copy_again"
done
[ -d wheels ] && [ ! -L wheels ] \
  || fail "$here/wheels is missing or not a folder (a link is never followed)" "$copy_again"
[ -s SHA256SUMS ] || fail "$here/SHA256SUMS is empty: it lists none of the bundle's files" "$copy_again"
# Every line: 64 hex digits, two spaces, a plain relative path (no '..', no leading '/'), as `a2x-local bundle` writes;
# bytes as bytes (LC_ALL=C) and a NUL or a carriage return in a line is a character no path here holds (grep -a).
bad_line="$(LC_ALL=C grep -anvE '^[0-9a-f]{64}  [A-Za-z0-9_+][A-Za-z0-9._+/-]*$' SHA256SUMS | head -1 | cut -d: -f1 || true)"
[ -z "$bad_line" ] \
  || fail "$here/SHA256SUMS line ${bad_line%%:*} is not 'SHA-256  PATH' with a plain path inside the bundle" "$copy_again"
bad_line="$(LC_ALL=C grep -anE '  (.*/)?\.\.?(/|$)|//|/$' SHA256SUMS | head -1 | cut -d: -f1 || true)"
[ -z "$bad_line" ] || fail "$here/SHA256SUMS line ${bad_line%%:*} names a path with '.', '..' or empty parts" "$copy_again"
listed="$(cut -c67- SHA256SUMS)"
twice="$(sort <<< "$listed" | uniq -d | head -1)"
[ -z "$twice" ] || fail "$here/SHA256SUMS lists $twice more than once" "$copy_again"
for file in BUNDLE_ID PLATFORM requirements.lock project.lock install.sh; do
  grep -qxF -- "$file" <<< "$listed" || fail "$here/SHA256SUMS does not list $file" "$copy_again"
done
inside() {  # a listed path: every folder on the way a real folder in the bundle (never a link), then a regular file
  local rel="$1" walked="" part
  local -a parts
  IFS=/ read -r -a parts <<< "$rel"
  for part in "${parts[@]:0:${#parts[@]}-1}"; do
    walked="${walked:+$walked/}$part"
    [ -d "$walked" ] && [ ! -L "$walked" ] \
      || fail "$here/$walked (on the way to $rel, listed in SHA256SUMS) is a link or not a folder" "$copy_again"
  done
  [ ! -L "$rel" ] || fail "$here/$rel (listed in SHA256SUMS) is a symbolic link, which is never followed" "$copy_again"
  [ -f "$rel" ] || fail "$here/$rel (listed in SHA256SUMS) is missing or not a regular file" "$copy_again"
}
while IFS= read -r file; do inside "$file"; done <<< "$listed"
bundle_id="$(head -c 200 BUNDLE_ID | head -1)"
[[ "$bundle_id" =~ ^[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] || fail "$here/BUNDLE_ID does not hold a bundle id" "$copy_again"

echo "install: checking the bundle $bundle_id against SHA256SUMS" >&2
sha256sum --check --quiet --strict SHA256SUMS \
  || fail "files of the bundle do not match $here/SHA256SUMS (named above)" "$copy_again"
[ -r wheels ] && [ -x wheels ] || fail "$here/wheels cannot be read" "$copy_again"
# One pass over what SHA256SUMS lists, then one look-up per entry of wheels/ (a grep over the whole list for each
# entry was quadratic: minutes for a few thousand entries).
declare -A is_listed=()
while IFS= read -r file; do is_listed["$file"]=1; done <<< "$listed"
while IFS= read -r -d '' file; do
  # A plain name first: no line break, nothing a look-up could take as more than the name.
  [[ "$file" =~ ^wheels/[A-Za-z0-9][A-Za-z0-9._+-]*$ ]] \
    || fail "wheels/ holds an entry whose name is no plain file name: $(printf '%q' "$file")" "remove it: wheels/ holds only the bundle's wheels"
  [ -f "$file" ] && [ ! -L "$file" ] || fail "$here/$file is not a regular file" "remove it: wheels/ holds only the bundle's wheels"
  [ -n "${is_listed["$file"]+listed}" ] || fail "$here/$file is not listed in SHA256SUMS" "remove it: only listed wheels are installed"
done < <(find wheels -mindepth 1 -maxdepth 1 -print0)

describe() {  # what a folder holds, in a few words: its first entries, and how many Python packages
  local entries packages
  entries="$(ls -A "$1" 2>/dev/null | head -6 | tr '\n' ' ' || true)"
  packages="$(find "$1" -maxdepth 5 -path '*/site-packages/*.dist-info' -type d 2>/dev/null | wc -l || true)"
  if [ "${packages:-0}" -gt 0 ]; then printf 'a Python environment with %s installed packages; ' "$packages"; fi
  printf 'it holds: %s' "${entries% }"
}

# --- 2. the virtual environment -----------------------------------------------------------------------------------
while [[ "$venv" == */ && "$venv" != / ]]; do venv="${venv%/}"; done
if [ -L "$venv" ]; then
  fail "$venv is a symbolic link (to $(printf '%q' "$(readlink -- "$venv")")), which is never followed" \
    "give the folder itself or a new path"
fi
marker="$venv/$MARKER"
upgrade=0
if [ -e "$venv" ]; then
  [ -d "$venv" ] || fail "$venv exists and is not a folder" "give the path of a new virtual environment"
  if [ -n "$(ls -A "$venv")" ]; then
    if [ -e "$marker" ] || [ -L "$marker" ]; then
      [ -f "$marker" ] && [ ! -L "$marker" ] || fail "$marker is not a regular file" "remove it, then run again with --force"
      upgrade=1
    elif [ "$force" = 0 ]; then
      fail "$venv is not empty and no a2x-local bundle installed into it ($(describe "$venv"))" \
        "give a new or empty folder; to install into this one anyway, add --force (nothing already in it is removed, but packages the bundle also carries are replaced by its versions)"
    else
      echo "install: --force: installing into $venv, which no bundle made; nothing already in it is removed" >&2
    fi
  fi
fi

py="${A2X_PYTHON:-python3.11}"
if [ ! -x "$venv/bin/python" ]; then
  command -v "$py" >/dev/null 2>&1 || fail "Python 3.11 ($py) not found" "install Python 3.11 with its venv module, or set A2X_PYTHON"
else
  py="$venv/bin/python"
fi
"$py" - "$(head -c 200 PLATFORM | head -1)" <<'PY' || fail "this bundle does not fit $py" "use Python 3.11 on Linux x86-64, or a bundle built for this machine"
import platform, sys
want = sys.argv[1]
have = f"cp{sys.version_info[0]}{sys.version_info[1]}-{sys.platform}-{platform.machine()}"
if have != want:
    print(f"install: the bundle is for {want}, this interpreter is {have}", file=sys.stderr)
    raise SystemExit(1)
PY

# The locks are handed to `pip install -r`, which takes a line as an option (-r, -c, --find-links, --index-url, -e
# read other files, named pipes and devices among them, or install from outside the bundle) or a URL or a path as a
# requirement. Only what `a2x-local bundle` writes is taken: comments, blank lines and `NAME==VERSION` lines with
# `--hash=sha256:HEX` options (continued with a backslash or not), in printable ASCII (a tab and spaces between the
# parts); anything else is refused by line. pip splits a lock with str.splitlines(), which also breaks a line at
# \x1c-\x1e, \x85, \u2028 and \u2029, and decodes it by a `coding:` comment of its first two lines (utf-7 spells
# \u2028 in ASCII): neither gets through, and every piece pip's own split makes is checked again.
# Then every pin has its one wheel in wheels/ (by the names wheel files carry), and project.lock pins a2x-local:
# a damaged bundle is named here, before the environment is made, not by pip half-way through.
"$py" - "$max_text" "$here/wheels" "$here/requirements.lock" "$here/project.lock" <<'PY' \
  || fail "a lock of the bundle $here does not fit the bundle (named above); nothing was made" "$copy_again"
import os, re, sys
cap, wheels, paths = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
pin = r"([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)"
digest = r"--hash=sha256:[0-9a-fA-F]{64}"
comment = r"(?:[ \t]+#(?:.*[^\\])?)?"   # a comment never ends with a backslash (pip would join the next line)
first = re.compile(rf"{pin}((?:[ \t]+{digest})*)[ \t]*(?:(\\)|{comment})")
more = re.compile(rf"[ \t]+{digest}(?:[ \t]+{digest})*[ \t]*(?:(\\)|{comment})")
control = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
foreign = re.compile(r"[^\t\x20-\x7e]")          # a lock line is printable ASCII, a tab allowed
coding = re.compile(r"coding[:=]")               # pip decodes the file by such a comment (PEP 263)
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
bad = 0
def refuse(path: str, number: int, what: str) -> None:
    global bad
    bad += 1
    print(f"install: error: {path}{f' line {number}' if number else ''}: {what}", file=sys.stderr)
def check(path: str, lines: list[str], pins: list[tuple[int, str, str]]) -> bool:
    continued, hashes, number = False, False, 0
    for number, line in enumerate(lines, start=1):
        shown = ascii(line[:80]) + ("..." if len(line) > 80 else "")
        found = foreign.search(line)
        if found:
            char = found[0]
            what = "a control character" if control.match(char) else "a character that is not ASCII"
            refuse(path, number, f"holds {what}, U+{ord(char):04X}, at column {found.start() + 1} (a lock line is "
                   f"printable ASCII; pip would split the line there or read it otherwise): {shown}")
            return False
        if coding.search(line):
            refuse(path, number, f"declares an encoding (pip would decode the file by it): {shown}")
            return False
        if continued:
            found = more.fullmatch(line)
            if not found:
                refuse(path, number, f"continues a requirement with what is not --hash=sha256:HEX: {shown}")
                return False
            continued, hashes = bool(found[1]), True
        elif not line.strip() or line.startswith("#"):
            if line.endswith("\\"):
                refuse(path, number, f"is a comment ending with a backslash (pip joins the next line to it): {shown}")
                return False
            continue
        else:
            found = first.fullmatch(line)
            if not found:
                what = "an option" if line.lstrip().startswith("-") else "a requirement that is not NAME==VERSION"
                refuse(path, number, f"is {what} (only NAME==VERSION --hash=sha256:HEX is taken): {shown}")
                return False
            pins.append((number, found[1], found[2]))
            continued, hashes = bool(found[4]), bool(found[3])
        if not continued and not hashes:
            refuse(path, number, f"is a requirement with no --hash=sha256:HEX: {shown}")
            return False
    if continued:
        refuse(path, number, "ends the file with a backslash: the requirement it continues has no end")
        return False
    return True
# The wheels by the name and version their file names carry (NAME-VERSION-[BUILD-]PY-ABI-PLATFORM.whl).
have: dict[tuple[str, str], list[str]] = {}
for entry in sorted(os.listdir(wheels)):
    parts = entry[:-4].split("-") if entry.endswith(".whl") else []
    if len(parts) in (5, 6):
        have.setdefault((norm(parts[0]), parts[1].lower()), []).append(entry)
for path in paths:
    with open(path, "rb") as stream:
        data = stream.read(cap + 1)
    if len(data) > cap:
        refuse(path, 0, f"the file holds more than {cap} bytes")
        continue
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        start = data.rfind(b"\n", 0, error.start) + 1
        number, line = data[:start].count(b"\n") + 1, data[start:].split(b"\n")[0]
        refuse(path, number, f"is not UTF-8 text (byte {error.start - start} of the line: {line[:60]!r})")
        continue
    pins: list[tuple[int, str, str]] = []
    # The lines as this script reads them, then the pieces pip's own split makes: both must be what a bundle writes.
    if not check(path, text.split("\n"), pins) or not check(path, text.splitlines(), []):
        continue
    for number, name, version in pins:
        found = have.get((norm(name), version.replace("-", "_").lower()), [])
        if len(found) != 1:
            what = "no wheel" if not found else f"{len(found)} wheels ({', '.join(found)})"
            refuse(path, number, f"pins {name}=={version}, but wheels/ holds {what} of it "
                   f"({name.replace('-', '_')}-{version}-*.whl): the bundle is not whole")
    if path.endswith("/project.lock") and "a2x-local" not in {norm(name) for _, name, _ in pins}:
        refuse(path, 0, "pins no a2x-local (a2x-local==VERSION --hash=sha256:HEX): the bundle would install "
               "no a2x-local")
raise SystemExit(1 if bad else 0)
PY

# The earlier marker proves the folder is a bundle's install only when it is exactly what this script writes: the
# header, one bundle line, then `package NAME==VERSION` lines. Read once, bounded, before anything changes; what it
# lists (NAME==VERSION, one a line) is all the rest of the script uses of it.
prior=""
if [ "$upgrade" = 1 ]; then
  prior="$("$py" - "$marker" <<'PY'
import os, re, stat, sys
path, cap = sys.argv[1], 1024 * 1024
def refuse(where: str, what: str) -> None:
    print(f"install: error: {path}{where}: {what}", file=sys.stderr)
    raise SystemExit(1)
try:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
except OSError as error:
    refuse("", f"cannot be opened ({error.strerror})")
with os.fdopen(fd, "rb") as stream:
    info = os.fstat(stream.fileno())
    if not stat.S_ISREG(info.st_mode):
        refuse("", "is not a regular file")
    if info.st_size > cap:
        refuse("", f"holds {info.st_size} bytes; a marker install.sh writes holds at most {cap}")
    data = stream.read(cap + 1)
if len(data) > cap:
    refuse("", f"holds more than {cap} bytes; a marker install.sh writes holds at most that")
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as error:
    refuse(f" byte {error.start}", "is not UTF-8 text")
if not text:
    refuse("", "is empty")
if not text.endswith("\n"):
    refuse("", "does not end with a line break (cut short)")
lines = text[:-1].split("\n")
if not lines[0].startswith("# Written by a2x-local's install.sh:"):
    refuse(" line 1", "is not the header install.sh writes (# Written by a2x-local's install.sh: ...)")
n = 1
while n < len(lines) and lines[n].startswith("# "):
    n += 1
if n == len(lines) or not re.fullmatch(r"bundle [A-Za-z0-9][A-Za-z0-9._+-]{0,199}", lines[n]):
    refuse(f" line {n + 1}", "is not the line 'bundle ID' that follows the header")
seen = set()
for number, line in enumerate(lines[n + 1:], start=n + 2):
    found = re.fullmatch(r"package ([A-Za-z0-9][A-Za-z0-9._-]{0,199})==([A-Za-z0-9][A-Za-z0-9.+!_-]{0,99})", line)
    if not found:
        refuse(f" line {number}", f"is not 'package NAME==VERSION': {line[:80]!r}")
    name = re.sub(r"[-_.]+", "-", found[1]).lower()
    if name in seen:
        refuse(f" line {number}", f"lists {found[1]} a second time")
    seen.add(name)
    print(f"{name}=={found[2]}")
PY
)" || fail "$marker is not a marker install.sh wrote, so it proves nothing about what the earlier install put there; nothing was changed" \
    "if a bundle installed into $venv, install into a new folder instead; if none did, remove the marker and run again with --force (nothing is then removed)"
fi

# The registry, checked whole before anything changes (a2x-local refuses the same things, but only after the
# environment would have been upgraded and the marker written): a regular file, a link to one only inside its own
# folder; its write-ahead log (beside the file the link leads to, where DuckDB keeps it) a regular file or absent,
# never a link; the copy's name one the file system can hold, and free.
if [ -n "$registry" ]; then
  registry_hint="give the registry file the install serves (--db)"
  kind() {  # what a path is, in words: stat's name for it, with named pipes and devices called so
    case "$(stat -L -c %F -- "$1" 2>/dev/null || echo unknown)" in
      fifo) echo "a named pipe (FIFO)" ;; "character special file") echo "a character device" ;;
      "block special file") echo "a block device" ;; socket) echo "a socket" ;; directory) echo "a folder" ;;
      *) echo "not a regular file" ;;
    esac
  }
  while [[ "$registry" == */ && "$registry" != / ]]; do registry="${registry%/}"; done
  registry_dir="$(dirname -- "$registry")"
  registry_real="$registry"
  if [ -L "$registry" ]; then
    pointed="$(printf '%q' "$(readlink -- "$registry")")"
    registry_real="$(realpath -e -- "$registry" 2>/dev/null)" \
      || fail "$registry is a symbolic link to nowhere or a loop (to $pointed); nothing was changed" "$registry_hint"
    [ "$(dirname -- "$registry_real")" = "$(realpath -e -- "$registry_dir")" ] \
      || fail "$registry is a symbolic link to $registry_real, outside the folder that holds it; a2x-local never follows the registry out of its folder; nothing was changed" \
        "give the file itself: --registry $registry_real (and point --db at it)"
  fi
  if [ ! -e "$registry" ]; then
    fail "$registry: no such registry; nothing was changed" "$registry_hint"
  elif [ ! -f "$registry" ]; then
    fail "$registry is $(kind "$registry"), not a regular file; nothing was changed" "$registry_hint"
  fi
  [ -r "$registry" ] || fail "$registry cannot be read, so it cannot be copied before the upgrade; nothing was changed" \
    "run install.sh as the user that owns the registry"
  wal="$registry_real.wal"
  if [ -L "$wal" ]; then
    fail "$wal, the registry's write-ahead log, is a symbolic link (to $(printf '%q' "$(readlink -- "$wal")")), which a2x-local never follows; nothing was changed" \
      "remove the link $wal (DuckDB creates the log itself)"
  elif [ -e "$wal" ] && [ ! -f "$wal" ]; then
    fail "$wal, the registry's write-ahead log, is $(kind "$wal"), not a regular file; nothing was changed" \
      "move $wal aside: DuckDB creates the log itself"
  fi
  backup="$registry.before-$bundle_id"
  name_max="$(getconf NAME_MAX "$registry_dir" 2>/dev/null || echo 255)"
  path_max="$(getconf PATH_MAX "$registry_dir" 2>/dev/null || echo 4096)"
  copies=("$backup")
  if [ -e "$wal" ]; then copies+=("$backup.wal"); fi
  for copy in "${copies[@]}"; do
    name="${copy##*/}"
    name_bytes="$(printf '%s' "$name" | wc -c)"
    [ "$name_bytes" -le "$name_max" ] && [ "$(printf '%s' "$copy" | wc -c)" -lt "$path_max" ] \
      || fail "$registry: its copy from before the upgrade, NAME.before-$bundle_id${copy##*"$backup"}, would have a name of $name_bytes bytes, more than the $name_max this file system allows (or a path longer than $path_max); nothing was changed" \
        "give the registry a shorter name (and point --db at it), then run again"
  done
  for copy in "$backup" "$backup.wal"; do
    # The copy of an earlier attempt may be the only copy from before the upgrade: never overwritten.
    if [ -e "$copy" ] || [ -L "$copy" ]; then
      fail "$copy already exists; nothing was changed" "it may be the only copy from before this upgrade: move it aside, then run again"
    fi
  done
  [ -w "$registry_dir" ] && [ -x "$registry_dir" ] \
    || fail "$registry_dir, the registry's folder, is not writable: the copy $backup cannot be made there; nothing was changed" \
      "run install.sh as the user that owns the registry"
fi

# --- 3-5. install -------------------------------------------------------------------------------------------------
# Only this bundle's wheels: no index, no pip configuration, no PIP_* variables.
for name in $(env | sed -n 's/^\(PIP_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$name"; done
export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
pip_install=(-m pip install --no-index --find-links "$here/wheels" --no-deps --require-hashes --quiet)

if [ ! -x "$venv/bin/python" ]; then
  echo "install: creating $venv" >&2
  "$py" -m venv "$venv"
fi
# What the environment holds before this bundle installs anything (name==version, one a line): a package in it is
# the bundle's only where the earlier marker says so, whatever version the bundle puts in its place.
had="$("$venv/bin/python" - <<'PY'
import importlib.metadata as md, re
for dist in md.distributions():
    if dist.metadata["Name"]:
        print(f"{re.sub(r'[-_.]+', '-', dist.metadata['Name']).lower()}=={dist.version}")
PY
)"
echo "install: installing $(grep -c '==' requirements.lock) packages into $venv (a few minutes)" >&2
if grep -q '==' requirements.lock; then "$venv/bin/python" "${pip_install[@]}" -r requirements.lock; fi
"$venv/bin/python" "${pip_install[@]}" --force-reinstall -r project.lock

# An upgrade: what the earlier bundle installed (its marker says) and this one does not carry goes; nothing else.
if [ "$upgrade" = 1 ]; then
  stale="$("$venv/bin/python" - "$prior" requirements.lock project.lock <<'PY'
import importlib.metadata as md, re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
before = dict(line.split("==", 1) for line in sys.argv[1].splitlines())   # checked: NAME==VERSION, normalised
keep = {"pip"} | {norm(line.split("==")[0]) for path in sys.argv[2:] for line in open(path) if "==" in line}
installed = {norm(d.metadata["Name"]): d.version for d in md.distributions() if d.metadata["Name"]}
stale = []
for name, version in sorted(before.items()):
    if name in keep or name not in installed:
        continue
    if installed[name] != version:   # changed since the bundle put it there: someone else's now
        print(f"install: keeping {name} {installed[name]}: the earlier bundle installed {version}", file=sys.stderr)
        continue
    stale.append(name)
print(" ".join(stale))
PY
)"
  if [ -n "$stale" ]; then
    echo "install: removing what the earlier bundle installed and this one does not carry: $stale" >&2
    # shellcheck disable=SC2086  # one word per distribution
    "$venv/bin/python" -m pip uninstall --yes --quiet $stale
  fi
fi
written="$(mktemp "$venv/.$MARKER.XXXXXX")"   # a new file (never one that was there), renamed over the marker
{
  echo "# Written by a2x-local's install.sh: the bundle installed here and the packages it installed. An upgrade"
  echo "# removes only packages listed here that the newer bundle does not carry. Do not edit."
  echo "bundle $bundle_id"
  "$venv/bin/python" - "$had" "$prior" requirements.lock project.lock <<'PY'
import re, sys
norm = lambda name: re.sub(r"[-_.]+", "-", name).lower()
had = {line.split("==")[0] for line in sys.argv[1].splitlines() if "==" in line}
ours = {line.split("==")[0] for line in sys.argv[2].splitlines()}   # the earlier marker's: the bundle's still
pinned = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)(?:\s|$)")
for path in sys.argv[3:]:
    for line in open(path, encoding="utf-8"):
        found = pinned.match(line)
        if found and (norm(found[1]) not in had or norm(found[1]) in ours):
            print(f"package {found[1]}=={found[2]}")
PY
} > "$written"
chmod 644 "$written"
mv -f "$written" "$marker"

"$venv/bin/a2x-local" --version
if [ -n "$registry" ]; then
  # Checked above; a copy that still fails (the disk full) is removed, so that running again is not refused.
  copied=("$backup")
  if [ -e "$wal" ]; then copied+=("$backup.wal"); fi   # changes not yet checkpointed
  for copy in "${copied[@]}"; do
    original="$registry"; [ "$copy" = "$backup" ] || original="$wal"
    if ! why="$(cp -p -- "$original" "$copy" 2>&1)"; then
      rm -f -- "${copied[@]}"
      fail "$venv holds bundle $bundle_id now, but $original could not be copied to $copy (${why##*: }); the registry was not opened, nothing in it changed, and no copy was left" \
        "fix that, then run the same command again"
    fi
  done
  echo "install: copied $registry to $backup (to roll back: install the older bundle and copy it back)" >&2
  "$venv/bin/a2x-local" stats --db "$registry" \
    || fail "$venv holds bundle $bundle_id now, but a2x-local could not open $registry (it says why above); $backup is its copy from before" \
      "fix what it names, move $backup aside, then run the same command again"
fi
echo "install: done: $bundle_id in $venv" >&2
