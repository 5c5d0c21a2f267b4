"""Which scripts a registry is written in, and its main language.

Two decisions rest on this: which embedding model indexes a registry (an English-only model is useless on Chinese
text), and which language the taxonomy's categories are named in. Both need only the script, which Unicode ranges
tell exactly and cheaply; a language is named only where the script settles it (Han without kana is Chinese, kana
is Japanese, Hangul is Korean) or, for Latin script, where English function words make up a clear share of the words.

Counting is over letters (digits, punctuation, spaces and symbols are ignored), with regular expressions so a large
registry is measured at C speed; registries with more than `SAMPLE_TEXTS` texts are measured on an even sample.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

# Unicode ranges of the scripts told apart; letters of any other script count as "other".
_SCRIPT_RANGES = {
    "latin": "A-Za-z\u00c0-\u024f\u1e00-\u1eff",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f",
    "kana": "\u3040-\u30ff\u31f0-\u31ff\uff66-\uff9f",
    "hangul": "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f",
    "cyrillic": "\u0400-\u052f",
    "greek": "\u0370-\u03ff",
    "arabic": "\u0600-\u06ff\u0750-\u077f",
    "hebrew": "\u0590-\u05ff",
    "devanagari": "\u0900-\u097f",
    "thai": "\u0e00-\u0e7f",
}
_SCRIPT_PATTERNS = {name: re.compile(f"[{ranges}]") for name, ranges in _SCRIPT_RANGES.items()}
_LETTER = re.compile(r"[^\W\d_]")
_LATIN_WORD = re.compile(r"[A-Za-z]+")
# Frequent English function words: about a quarter of the words of English prose, a few percent of French, German
# or Spanish text (where only "a", "in" and the like coincide).
_ENGLISH_WORDS = frozenset(
    "the a an and or of to in for with on by is are be from this that it as at your you can not if its".split())
_ENGLISH_SHARE = 0.08
# Scripts whose language is settled by the script itself.
_SCRIPT_LANGUAGE = {"han": "Chinese", "kana": "Japanese", "hangul": "Korean", "greek": "Greek", "hebrew": "Hebrew",
                    "thai": "Thai"}
SAMPLE_TEXTS = 5000


@dataclass(frozen=True)
class ScriptProfile:
    """Letters per script in a body of text, and what follows from them."""

    letters: int
    counts: dict[str, int]
    english_share: float       # share of the Latin-script words that are English function words

    def share(self, script: str) -> float:
        return self.counts.get(script, 0) / self.letters if self.letters else 0.0

    @property
    def non_latin_share(self) -> float:
        """Share of letters outside the Latin script (0 for text without letters)."""
        return 1.0 - self.share("latin") if self.letters else 0.0

    @property
    def main_script(self) -> str:
        """The script with the most letters ("latin" for text without letters); Japanese mixes Han and kana, so
        Han text with a tenth or more kana counts as kana."""
        if not self.letters:
            return "latin"
        han, kana = self.counts.get("han", 0), self.counts.get("kana", 0)
        counts = dict(self.counts)
        if kana and kana >= 0.1 * (han + kana):
            counts["kana"], counts["han"] = han + kana, 0
        return max(sorted(counts), key=lambda script: counts[script])

    @property
    def script_family(self) -> str:
        """The main script with Han and kana as one ("han"): Japanese and Chinese text share characters, so a
        kanji-only query and a Japanese registry still share words."""
        return "han" if self.main_script == "kana" else self.main_script

    def shares_script_with(self, other: ScriptProfile) -> bool:
        """Whether two texts are written in the same script family; text without letters goes with anything."""
        return not self.letters or not other.letters or self.script_family == other.script_family

    @property
    def language(self) -> str:
        """The main language where the script settles it, else a description by script ("Cyrillic-script")."""
        script = self.main_script
        if script == "latin":
            return "English" if self.english_share >= _ENGLISH_SHARE else "Latin-script (not English)"
        if script in _SCRIPT_LANGUAGE:
            return _SCRIPT_LANGUAGE[script]
        return f"{script.capitalize()}-script"

    def to_dict(self) -> dict[str, object]:
        return {"letters": self.letters, "non_latin_share": round(self.non_latin_share, 4),
                "main_script": self.main_script, "language": self.language}


def _sample(texts: Sequence[str]) -> Sequence[str]:
    if len(texts) <= SAMPLE_TEXTS:
        return texts
    step = len(texts) / SAMPLE_TEXTS
    return [texts[int(i * step)] for i in range(SAMPLE_TEXTS)]


def script_profile(texts: Sequence[str]) -> ScriptProfile:
    """Letters per script over ``texts`` (an even sample of them when there are many)."""
    body = "\n".join(_sample(texts))
    letters = len(_LETTER.findall(body))
    counts = {name: len(pattern.findall(body)) for name, pattern in _SCRIPT_PATTERNS.items()}
    counts = {name: count for name, count in counts.items() if count}
    other = letters - sum(counts.values())
    if other > 0:
        counts["other"] = other
    words = [word.lower() for word in _LATIN_WORD.findall(body)]
    english = sum(1 for word in words if word in _ENGLISH_WORDS) / len(words) if words else 0.0
    return ScriptProfile(letters, counts, english)


def resolve_language(setting: str, texts: Sequence[str]) -> str:
    """A language setting as text for a prompt: "auto" is the main language of ``texts``; anything else is kept."""
    setting = setting.strip()
    return script_profile(texts).language if setting.lower() == "auto" else setting
