"""When a prompt needs the line "categories and services may be written in another language than the request".

The line costs some twenty tokens in every descent and selection prompt, and it only helps where the request and
the catalogue are written in different languages. The catalogue's language is measured once (by script, and for
Latin script by English function words: `a2x_local.registry.script_profile`); a request in the same language as a
catalogue that is written in one language gets no line. Anything unsure (a mixed catalogue, a request without
enough words to tell) keeps it.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from a2x_local.registry import Service, script_profile

# A catalogue whose main script holds less than this share of its letters mixes languages: every request gets
# the line.
MIXED_BELOW = 0.9


class LanguageHint:
    """Decides, per request, whether the cross-language line goes into its prompts (``policy`` "auto"), or always
    or never does."""

    def __init__(self, catalogue_texts: Iterable[str], policy: str = "auto") -> None:
        self.policy = policy
        texts = [text for text in catalogue_texts if text]
        profile = script_profile(texts)
        self.language = profile.language
        self.mixed = bool(profile.letters) and profile.share(profile.main_script) < MIXED_BELOW
        self._needed = lru_cache(maxsize=4096)(self._decide)

    def needed(self, query: str) -> bool:
        """Whether prompts for ``query`` carry the line."""
        if self.policy != "auto":
            return self.policy == "always"
        return self._needed(query)

    def _decide(self, query: str) -> bool:
        return self.mixed or script_profile([query]).language != self.language

    def describe(self) -> dict[str, object]:
        return {"policy": self.policy, "catalogue_language": self.language, "mixed": self.mixed}


def catalogue_texts(services: Iterable[Service]) -> list[str]:
    """The names and descriptions of ``services``: what the catalogue's language is measured on."""
    return [text for service in services for text in (service.name, service.description)]
