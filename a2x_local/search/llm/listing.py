"""How categories and services are written into prompts: short single lines, numbered in stored order.

Lines come in two lengths. "full" cuts a description at a character count; "compact" keeps only its first
sentence (cut shorter still), which is where builds and tool authors put what a thing does, and drops the detail
that follows. A compact service line keeps its full text when its name is shared, since a name a second service
also has cannot tell the two apart.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from a2x_local.llm import as_data, clip
from a2x_local.registry import Service
from a2x_local.search.llm.config import LlmSearchConfig
from a2x_local.taxonomy import TreeNode

# A sentence ends at . ! ? (Latin, before a space) or 。！？ (CJK, no space needed).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])")
# A first "sentence" shorter than this is an abbreviation or a stray full stop ("Get info."), not the whole point.
_MIN_SENTENCE_CHARS = 20
_NAME_NOISE = re.compile(r"[\s_\-./:]+")
# Words a cut line should not end on: they promise a continuation the cut removed.
_DANGLING = frozenset({"a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to", "with"})


def clip_words(text: str, limit: int) -> str:
    """Like `clip`, but cut after a whole word (a cut word costs tokens and says little); a first word longer than
    the limit is cut as `clip` cuts it."""
    text = " ".join(text.split())
    if limit <= 0 or len(text) <= limit:
        return text
    head = text[: max(1, limit - 1)]
    cut = head.rfind(" ") if text[len(head)] != " " else len(head)
    words = (head[:cut] if cut > 0 else head).rstrip(" ,;:-").split(" ")
    while len(words) > 1 and words[-1].lower() in _DANGLING:
        words.pop()
    return " ".join(words).rstrip(" ,;:-") + "…"


def first_sentence(text: str) -> str:
    """The text up to its first sentence end, or all of it; at least a few words, so "e.g." cannot end it."""
    text = " ".join(text.split())
    for match in _SENTENCE_END.finditer(text):
        if match.start() >= _MIN_SENTENCE_CHARS:
            return text[: match.start()].rstrip()
    return text


def name_key(name: str) -> str:
    """A name with case and separators ignored: "Get_Weather", "get weather" and "getWeather" are one name."""
    return _NAME_NOISE.sub("", name).casefold()


def shared_names(services: Iterable[Service]) -> set[str]:
    """The name keys that more than one service carries."""
    counts = Counter(name_key(service.name) for service in services)
    return {key for key, count in counts.items() if count > 1}


def service_line(service: Service, config: LlmSearchConfig, *, ambiguous: bool = False) -> str:
    """`name: description`: the description cut to the configured length, or in compact lines its first sentence
    (the full cut when ``ambiguous``: the name alone does not identify the service). Service text is data
    (`as_data`)."""
    name = clip(as_data(service.name), config.name_chars)
    if config.service_lines == "compact" and not ambiguous:
        description = clip_words(first_sentence(as_data(service.description)), config.compact_service_chars)
    else:
        description = clip(as_data(service.description), config.service_description_chars)
    return f"{name}: {description}" if description else name


def service_lines(services: Iterable[Service], config: LlmSearchConfig) -> dict[str, str]:
    """Every service's line by id, computed once per method (compact lines look at the whole registry's names)."""
    services = list(services)
    shared = shared_names(services) if config.service_lines == "compact" else set()
    return {s.id: service_line(s, config, ambiguous=name_key(s.name) in shared) for s in services}


def name_lines(services: Iterable[Service], config: LlmSearchConfig) -> dict[str, str]:
    """Every service's name alone (cut like every name), for the low-ranked tail of a pre-ranked group."""
    return {s.id: clip(as_data(s.name), config.name_chars) for s in services}


def shared_opening(descriptions: Sequence[str]) -> str:
    """The longest run of opening words that at least half of the siblings' descriptions (two or more) begin with,
    leaving each at least two words of its own ("Services for" in "Services for weather forecasts, …"): words that
    tell no sibling from another. Empty when there is none."""
    texts = [text.split() for text in descriptions]
    best: list[str] = []
    for length in range(1, max((len(t) for t in texts), default=0)):
        counts = Counter(tuple(t[:length]) for t in texts if len(t) >= length + 2)
        if not counts:
            break
        opening, count = counts.most_common(1)[0]
        if count < max(2, (len(texts) + 1) // 2):
            break
        best = list(opening)
    return " ".join(best)


def category_line(node: TreeNode, config: LlmSearchConfig, *, boundary: bool, opening: str = "") -> str:
    """`name: description`, plus the boundary when the mode needs the sharpest distinctions.

    A compact line drops ``opening`` (the siblings' shared opening words) and keeps the rest of the description's
    first sentence. Built boundaries read "NOT here: …"; an imported one may be worded otherwise ("Includes …;
    excludes …"), so only text that already says what it is shown as is, and other text is labelled as a boundary.
    """
    if config.category_lines == "compact":
        text = " ".join(node.description.split())
        if opening and text.startswith(opening + " "):
            text = text[len(opening) + 1:]
        description = clip_words(first_sentence(text), config.compact_category_chars)
    else:
        description = clip(node.description, config.category_description_chars)
    line = f"{clip(node.name, config.name_chars)}: {description}"
    if boundary and node.boundary and config.boundary_chars:
        text = clip(node.boundary, config.boundary_chars)
        line += f" ({text})" if text.lower().startswith("not here") else f" (boundary: {text})"
    return line


def confusable(members: Mapping[str, frozenset[str]], min_overlap: float) -> set[str]:
    """The siblings easily confused with another: those sharing at least ``min_overlap`` of the smaller one's
    services with some sibling (``members``: sibling id -> its subtree's services). 0 marks every sibling."""
    if min_overlap <= 0:
        return set(members)
    marked: set[str] = set()
    ids = list(members)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            smaller = min(len(members[a]), len(members[b]))
            if smaller and len(members[a] & members[b]) >= min_overlap * smaller:
                marked |= {a, b}
    return marked


def numbered(lines: Sequence[str]) -> str:
    """Numbered from 1 in the given order (numeric order: 1, 2, … 10, never 1, 10, 2)."""
    return "\n".join(f"{k}. {line}" for k, line in enumerate(lines, start=1))


def shown_order(config: LlmSearchConfig, query: str, key: str, count: int) -> list[int] | None:
    """The order a list of ``count`` options is shown to ``query`` in: None for the stored order, or with
    `option_order = "shuffled"` a permutation drawn from the seed, the query and the list's ``key`` (the same every
    run, different per query and list), so a model that favours a position does not favour one branch."""
    if config.option_order == "tree" or count < 2:
        return None
    order = list(range(count))
    random.Random(f"{config.seed}|{query}|{key}").shuffle(order)
    return order
