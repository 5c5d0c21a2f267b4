"""Answers as positions in an offered list: the regex that bounds them, their token budget, and their parsing.

Models never write ids: they answer with 1-based positions (or NONE), and code maps positions back to ids.
The regex for "a number from 1 to n" is built here digit by digit: a few lines, and no pinned library offers it.
"""

from __future__ import annotations

from a2x_local.llm import RegexConstraint

NONE = "NONE"


def _digit_class(low: int, high: int) -> str:
    return str(low) if low == high else f"[{low}-{high}]"


def number_regex(n: int) -> str:
    """A regex matching exactly the decimal numbers 1..n (no leading zeros, no sign)."""
    if n < 1:
        raise ValueError("a list of positions needs at least one item")
    if n < 10:
        return _digit_class(1, n)
    text = str(n)
    width = len(text)
    alternatives = ["[1-9]"] + [f"[1-9][0-9]{{{length - 1}}}" if length > 2 else "[1-9][0-9]"
                                for length in range(2, width)]
    # Numbers of n's width: at the first position where they go below n's digit, anything may follow.
    for i, char in enumerate(text):
        low = 1 if i == 0 else 0
        digit = int(char)
        if digit > low:
            rest = width - i - 1
            tail = "" if rest == 0 else ("[0-9]" if rest == 1 else f"[0-9]{{{rest}}}")
            alternatives.append(text[:i] + _digit_class(low, digit - 1) + tail)
    alternatives.append(text)
    return "|".join(alternatives)


def positions_constraint(n: int, max_items: int, *, allow_none: bool = True) -> RegexConstraint:
    """Up to ``max_items`` comma-separated positions out of ``n``, or NONE."""
    number = f"({number_regex(n)})"
    items = max(1, min(n, max_items))
    pattern = number if items == 1 else f"{number}(,{number}){{0,{items - 1}}}"
    return RegexConstraint(f"{NONE}|{pattern}" if allow_none else pattern)


def positions_budget(n: int, max_items: int, margin: int) -> int:
    """Answer tokens for the longest valid answer; Qwen tokenizers spend one token per digit and per comma."""
    items = max(1, min(n, max_items))
    return items * (len(str(n)) + 1) + margin


def parse_positions(answer: str | None, n: int) -> list[int]:
    """0-based indexes in the order answered, duplicates and out-of-range numbers dropped; NONE is empty."""
    if not answer or answer.strip() == NONE:
        return []
    chosen: list[int] = []
    for part in answer.split(","):
        part = part.strip()
        if part.isdigit() and 1 <= int(part) <= n and int(part) - 1 not in chosen:
            chosen.append(int(part) - 1)
    return chosen
