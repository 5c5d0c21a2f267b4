"""Model-written text that repeats itself is cut where the repetition starts.

A weak model that loses its thread writes the same words over and over ("Weather forecasts. Weather forecasts.
Weather forecasts. …") until the schema's length bound stops it: the answer is valid, and bounded, but the category
it describes would be shown to every later search that way. Every text a build keeps from a model (category names,
descriptions, decision rules, boundaries, the classification axis) passes `cut_repetition`: where a run of words
(one word or more) appears `REPEATS` times in a row, case and punctuation aside, the text ends after its first
occurrence. Each cut is counted in the build's statistics (`repeated_text_cut`).
"""

from __future__ import annotations

REPEATS = 3
_PUNCTUATION = ".,;:!?…-–—()[]\"'"


def cut_repetition(text: str) -> tuple[str, bool]:
    """The text up to the end of the first unit that repeats `REPEATS` times in a row (and whether it was cut).

    Works on words: a text a schema bounds holds a few dozen, so trying every start and every unit length is cheap.
    """
    words = text.split()
    keys = [word.casefold().strip(_PUNCTUATION) for word in words]
    count = len(words)
    for start in range(count):
        for size in range(1, (count - start) // REPEATS + 1):
            unit = keys[start:start + size]
            if not any(unit):
                continue
            if all(keys[start + r * size:start + (r + 1) * size] == unit for r in range(1, REPEATS)):
                kept = " ".join(words[:start + size]).rstrip(" ,;:-–—")
                return kept, True
    return " ".join(words), False
