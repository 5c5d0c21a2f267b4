"""A deterministic stand-in for a model, for build tests and benchmarks (never a product default).

It answers every build call of a `ScriptedEngine` from ``Request.context`` and the services' own words:
categories are the words that cover most of a node's services (a greedy set cover), a service belongs to every
category whose word it contains, refines add categories for unassigned services, the cross-domain pass picks a
domain whose name the service's name mentions. The resulting trees are plausible enough to measure prompt sizes,
rounds and requests per round the way a real model would see them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

from a2x_local.llm import Request
from a2x_local.registry import Service

_STOP_TEXT = """
a an and any are as at be by can for from get gets given has have in into is it its of on or that the this to
with will which what when where who how you your user users api apis tool tools data information info query
queries search searches searching find finds look lookup fetch fetches retrieve retrieves return returns returned
list lists provide provides provided using use used based specific specified parameter parameters takes take
refers refer such also other more about all each one two three new via like number code name names type types
value values result results request requests response details detail service services allow allows able
function functions method endpoint endpoints string integer default optional required format example set
"""
_STOP = frozenset(_STOP_TEXT.split())
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    """PyStemmer's English stemmer, the one the build's keyword merge (`keyword_merge = "stem"`) uses."""
    import Stemmer

    return Stemmer.Stemmer("english")


def content_words(text: str) -> list[str]:
    """Distinct stemmed content words in order of appearance (camelCase and snake_case split)."""
    words = [w.lower() for w in _WORD.findall(text)]
    stems = _stemmer().stemWords([w for w in words if len(w) >= 3 and w not in _STOP])
    return list(dict.fromkeys(s for s in stems if s[0].isalpha() and len(s) >= 3 and s not in _STOP))[:40]


def category_text(word: str) -> dict[str, str]:
    """The category fields the policy writes for a word; regenerated identically when a refine keeps it.

    The texts are as long as a real model's typically are (they are what every classification prompt repeats),
    so prompt-token measurements stay realistic.
    """
    topic = word.replace("_", " ")
    return {"name": topic.title()[:40],
            "description": f"Services that help users with {topic}: finding, checking and managing {topic}"
                           " information and carrying out related everyday tasks.",
            "decision_rule": f"If the user wants to look up, plan or act on anything about {topic}, it belongs here.",
            "boundary": f"NOT here: services that only mention {topic} in passing while serving another purpose"
                        " (goes to the sibling that covers that purpose)."}


def categories_json(words: Sequence[str], sources: Sequence[int] | None = None,
                    keywords: Sequence[list[str]] | None = None) -> str:
    """A design/refine answer: the axis, then one category per word (its text from ``category_text``), optional
    refine sources."""
    categories = []
    for i, word in enumerate(words):
        entry = {"source": sources[i]} if sources is not None else {}
        entry.update(category_text(word))
        entry["keywords"] = list(keywords[i]) if keywords is not None else [word]
        categories.append(entry)
    return json.dumps({"dimension": "user-facing functional domain", "categories": categories})


class WordPolicy:
    """``ScriptedEngine(WordPolicy(services))`` builds word-based trees deterministically."""

    def __init__(self, services: Iterable[Service], *, match_words: int = 8, keywords_per_service: int = 3) -> None:
        self.words = {s.id: content_words(f"{s.name} {s.description}") for s in services}
        self.name_words = {s.id: set(content_words(s.name)) for s in services}
        self.match = {sid: set(words[:match_words]) | self.name_words[sid] for sid, words in self.words.items()}
        self.keywords_per_service = keywords_per_service
        # Word co-occurrence over the registry: how a service without a category word still finds its category.
        self.together: dict[str, Counter] = {}
        for words in self.match.values():
            for word in words:
                self.together.setdefault(word, Counter()).update(words)

    def __call__(self, request: Request) -> str:
        context = request.context
        if context.get("call") == "descend":      # incremental placement walks services down the tree
            return self._descend(context, request.messages[-1]["content"])
        return getattr(self, f"_{context['step']}")(context)

    def _descend(self, context: dict, prompt: str) -> str:
        """At most two children named by one of the request's words; else the one whose word co-occurs most with
        them in the registry; NONE when nothing relates."""
        asked = content_words(context["query"])
        children = [(number, name.strip().lower().replace(" ", "_"))
                    for number, name in re.findall(r"^(\d+)\. ([^:]+):", prompt, flags=re.MULTILINE)]
        chosen = [number for number, word in children if word in asked][:2]
        if not chosen and children:
            scores = [sum(self.together.get(word, Counter())[child] for word in asked) for _, child in children]
            best = max(range(len(children)), key=lambda i: (scores[i], -i))
            chosen = [children[best][0]] if scores[best] > 0 else []
        return ",".join(chosen[: context["max_items"]]) or "NONE"

    # -- answers -----------------------------------------------------------------------------------------------

    def _keywords(self, context: dict) -> str:
        most = min(self.keywords_per_service, context.get("max_keywords", self.keywords_per_service))
        lines = []
        for k, service_id in enumerate(context["services"], start=1):
            words = [w for w in self.words[service_id] if len(w) <= 30][:most] or ["misc"]
            lines.append(f"{k}: {', '.join(words)}")
        return "\n".join(lines)

    def cover(self, service_ids: Sequence[str], most: int, least: int, allowed: set[str] | None = None,
              exclude: set[str] = frozenset()) -> list[str]:
        """Words that cover most services, greedily; words in more than half of the services are the parent's."""
        holders: dict[str, set[str]] = {}
        for service_id in service_ids:
            for word in self.match[service_id]:
                holders.setdefault(word, set()).add(service_id)
        limit = max(3, len(service_ids) // 2)
        candidates = sorted(w for w, members in holders.items() if len(members) <= limit and w not in exclude
                            and (allowed is None or w in allowed))
        uncovered = set(service_ids)
        chosen: list[str] = []
        while len(chosen) < most and candidates:
            best = max(candidates, key=lambda w: len(holders[w] & uncovered))
            if len(holders[best] & uncovered) < 3 and len(chosen) >= least:
                break
            chosen.append(best)
            candidates.remove(best)
            uncovered -= holders[best]
        return chosen

    def _design(self, context: dict) -> str:
        services = context["services"]
        allowed = {w for w, _ in context["keywords"]} if context["mode"] == "keywords" else None
        target = max(context.get("min_children", 2), min(context.get("max_children", 20), len(services) // 12))
        words = self.cover(services, target, context.get("min_children", 2), allowed)
        return categories_json(words, keywords=self.related(services, words))

    def related(self, service_ids: Sequence[str], words: Sequence[str], most: int = 6) -> list[list[str]]:
        """Each category's word plus the words found mostly among its own services (its vocabulary)."""
        total: dict[str, int] = {}
        for service_id in service_ids:
            for word in self.match[service_id]:
                total[word] = total.get(word, 0) + 1
        taken = set(words)
        result = []
        for word in words:
            inside: dict[str, int] = {}
            for service_id in service_ids:
                if word in self.match[service_id]:
                    for other in self.match[service_id]:
                        inside[other] = inside.get(other, 0) + 1
            extra = sorted((w for w, c in inside.items() if w not in taken and c >= 2 and c >= 0.6 * total[w]),
                           key=lambda w: (-inside[w], w))[: most - 1]
            taken.update(extra)
            result.append([word, *extra])
        return result

    def _validate(self, context: dict) -> str:
        bad = {"api", "data", "tool", "general", "other", "misc", "util", "cloud", "ai"}
        return json.dumps({"verdicts": [{"violations": ["catch_all"] if n.lower() in bad else []}
                                        for n in context["categories"]]})

    def _redesign(self, context: dict) -> str:
        words = [n.lower().replace(" ", "_") + "_domain" for n in context["flagged"]][: context["max_new"]]
        return categories_json(words)

    def _assign(self, context: dict) -> str:
        return "\n".join(f"{k}: {answer}" for k, answer in enumerate(self._filed(context), start=1))

    def _assign_one(self, context: dict) -> str:
        [answer] = self._filed(context)
        service_id = context["services"][0]
        about = " ".join(self.words[service_id][:4]) or "unclear"
        return f"Reasoning: it helps users with {about}.\nCategories: {answer}"

    def _assign_new(self, context: dict) -> str:
        """New categories: only those whose words the service carries (no closest-category guess)."""
        return "\n".join(f"{k}: {answer}" for k, answer in enumerate(self._filed(context, guess=False), start=1))

    def _filed(self, context: dict, *, guess: bool = True) -> list[str]:
        """Per offered service: the positions of every category whose words it carries, or NONE."""
        keywords = [set(k) or {n.lower()} for k, n in zip(context["category_keywords"], context["categories"],
                                                           strict=True)]
        most = context["max_labels"]
        answers = []
        for service_id in context["services"]:
            hits = [str(i) for i, words in enumerate(keywords, start=1) if words & self.match[service_id]]
            if not hits and guess:
                hits = self._closest(service_id, keywords)
            answers.append(",".join(hits[:most]) if hits else "NONE")
        return answers

    def _closest(self, service_id: str, keywords: Sequence[set[str]]) -> list[str]:
        """The category whose words co-occur most with the service's words (nothing when none co-occurs)."""
        scores = []
        for words in keywords:
            score = 0.0
            for word in self.match[service_id]:
                seen = self.together.get(word)
                if seen:
                    score += sum(seen[k] for k in words) / seen[word]
            scores.append(score)
        best = max(range(len(scores)), key=lambda i: (scores[i], -i)) if scores else 0
        return [str(best + 1)] if scores and scores[best] >= 0.2 else []

    def _refine(self, context: dict) -> str:
        current = [kw or [n.lower()] for kw, n in zip(context["category_keywords"], context["categories"],
                                                      strict=True)]
        heads = [words[0] for words in current]
        room = context["max_children"] - len(current)
        taken = {w for words in current for w in words}
        extra = self.cover(context["unassigned"], room, 0, exclude=taken) if room > 0 else []
        keywords = current + self.related(context["unassigned"], extra)
        return categories_json(heads + extra, list(range(1, len(current) + 1)) + [0] * len(extra), keywords)

    def _crossdomain_pick(self, context: dict) -> str:
        domains = [n.lower().replace(" ", "_") for n in context["domain_names"]]
        lines = []
        for k, service_id in enumerate(context["services"], start=1):
            # Words beyond the ones used for filing: a second, weaker theme of the service.
            tail = set(self.words[service_id][8:16])
            hit = next((str(i) for i, d in enumerate(domains, start=1) if d in tail), "NONE")
            lines.append(f"{k}: {hit}")
        return "\n".join(lines)

    def _crossdomain_place(self, context: dict) -> str:
        leaves = [n.split(" › ")[-1].lower().replace(" ", "_") for n in context["leaf_names"]]
        lines = []
        for k, service_id in enumerate(context["services"], start=1):
            words = set(self.words[service_id])
            hit = next((i for i, w in enumerate(leaves, start=1) if w in words), None)
            lines.append(f"{k}: {hit} 80" if hit else f"{k}: 1 20")
        return "\n".join(lines)
