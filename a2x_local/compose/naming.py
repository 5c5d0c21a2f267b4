"""Services a step names: "post it to our Slack channel" names the Slack server, whatever else mentions Slack.

A user who names a product has chosen its service; similarity search can rank that service low when many others
mention the product in passing (on publicMCP, "notify the on-call team on Slack" ranks the Slack server sixth,
behind notification hubs that list Slack among their channels). So a step of a plan with several steps looks its
words up among the registry's service names and puts the services it names first.

A name counts as a product name only when it is written like one: the service's name without generic words
("MCP", "Server", "API"), with a capital letter or a digit (lowercase names such as ``mcp-weather`` are
descriptions, not products). It must appear in the step with the same spelling and capitals, as whole words.
A one-word name written like an ordinary word (``Fetch``, ``Memory``) does not count at the start of the step,
where every word is capitalised. Lookups cost one dictionary probe per run of up to `MAX_NAME_WORDS` words, so a
registry of a million services answers as fast as one of ten.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_NAME_WORDS = 4
# Words that say what kind of software a name is, not which product: "Slack MCP Server" names Slack.
GENERIC_WORDS = frozenset({"mcp", "server", "servers", "api", "apis", "tool", "tools", "service", "integration",
                           "connector", "plugin", "agent", "client", "sdk", "the"})
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#&.']*[A-Za-z0-9+#]|[A-Za-z0-9]")
_SPLIT = re.compile(r"[\s_/:()\[\],|-]+")


def product_name(name: str) -> tuple[str, ...] | None:
    """The words of a service name that name a product, or None when the name does not read as a product."""
    words = [word for word in _SPLIT.split(name.strip()) if word]
    kept = tuple(word for word in words if word.lower() not in GENERIC_WORDS)
    if not kept or len(kept) > MAX_NAME_WORDS:
        return None
    if not any(char.isupper() or char.isdigit() for word in kept for char in word):
        return None
    if len(kept) == 1 and len(kept[0]) < 2:
        return None
    return kept


def _plain_word(words: tuple[str, ...]) -> bool:
    """One word written as any word opening a sentence is ("Fetch", "Transcribe"), not as a brand ("GitLab")."""
    return len(words) == 1 and words[0][:1].isupper() and words[0][1:] == words[0][1:].lower()


@dataclass(frozen=True)
class Words:
    """A text's Latin words, where each run of words separated only by spaces starts and ends, and whether the
    first word opens the text (nothing but spaces and punctuation before it)."""

    words: list[str]
    runs: list[tuple[int, int]]
    opens: bool = False

    @classmethod
    def of(cls, text: str) -> Words:
        words: list[str] = []
        runs: list[tuple[int, int]] = []
        first = _WORD.search(text)
        opens = first is not None and not any(char.isalnum() for char in text[:first.start()])
        start, last_end = 0, None
        for match in _WORD.finditer(text):
            if last_end is None or text[last_end:match.start()] != " ":
                if words:
                    runs.append((start, len(words)))
                start = len(words)
            words.append(match.group())
            last_end = match.end()
        if words:
            runs.append((start, len(words)))
        return cls(words, runs, opens)


class NameIndex:
    """Product name -> the services that carry it (one name may belong to several servers)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self.by_name: dict[tuple[str, ...], list[str]] = {}
        for service_id, name in names.items():
            key = product_name(name)
            if key is not None:
                self.by_name.setdefault(key, []).append(service_id)

    def __len__(self) -> int:
        return len(self.by_name)

    def named(self, text: str) -> list[str]:
        """The services ``text`` names, in the order the names appear (longest name first at one place)."""
        parsed = Words.of(text)
        found: list[str] = []
        for start, end in parsed.runs:
            for first in range(start, end):
                for size in range(min(MAX_NAME_WORDS, end - first), 0, -1):
                    key = tuple(parsed.words[first:first + size])
                    ids = self.by_name.get(key)
                    if ids is None or (first == 0 and parsed.opens and _plain_word(key)):
                        continue
                    found += [service_id for service_id in ids if service_id not in found]
                    break
        return found


def put_first(ranking: Sequence[str], named: Sequence[str]) -> list[str]:
    """A step's ranking with the services it names first (in their retrieval order where retrieved)."""
    if not named:
        return list(ranking)
    wanted = set(named)
    head = [service_id for service_id in ranking if service_id in wanted]
    head += [service_id for service_id in named if service_id not in head]
    return head + [service_id for service_id in ranking if service_id not in wanted]
