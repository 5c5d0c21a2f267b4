"""The script measure behind the embedding-model choice and the category language, on real registries and on
hand-made text of each script."""

from __future__ import annotations

import json

import pytest

from a2x_local.registry import resolve_language, script_profile
from a2x_local.registry.language import SAMPLE_TEXTS
from tests.support.paths import PUBLICMCP, TOOLRET, TOOLRET_ZH


def _texts(folder) -> list[str]:
    services = json.loads((folder / "services.json").read_text(encoding="utf-8"))
    return [f"{s['name']}\n{s['description']}" for s in services]


def test_the_real_registries_are_told_apart() -> None:
    english, chinese = script_profile(_texts(TOOLRET)), script_profile(_texts(TOOLRET_ZH))
    assert english.non_latin_share == 0.0 and english.language == "English"
    # The Chinese catalogue keeps English parameter names in its descriptions: still far above one half.
    assert 0.8 < chinese.non_latin_share < 0.95
    assert chinese.main_script == "han" and chinese.language == "Chinese"
    assert script_profile(_texts(PUBLICMCP)).language == "English"


@pytest.mark.parametrize(("text", "script", "language"), [
    ("获取北京明天的天气预报", "han", "Chinese"),
    ("明日の東京の天気を調べます", "kana", "Japanese"),     # Han and kana together: Japanese
    ("내일 서울 날씨를 알려주세요", "hangul", "Korean"),
    ("Узнать прогноз погоды на завтра", "cyrillic", "Cyrillic-script"),
    ("احصل على توقعات الطقس", "arabic", "Arabic-script"),
    ("Get the weather forecast for a city and the next days", "latin", "English"),
    ("Obtenir la météo prévue pour demain dans une ville donnée", "latin", "Latin-script (not English)"),
])
def test_each_script(text: str, script: str, language: str) -> None:
    profile = script_profile([text])
    assert profile.main_script == script and profile.language == language
    assert (profile.non_latin_share == 0.0) == (script == "latin")


def test_only_letters_count() -> None:
    profile = script_profile(["天气 12345 !!! ___ ---"])
    assert profile.letters == 2 and profile.non_latin_share == 1.0
    mixed = script_profile(["天气 ab"])          # two Han letters, two Latin letters
    assert mixed.non_latin_share == pytest.approx(0.5)
    empty = script_profile(["", "123"])
    assert empty.letters == 0 and empty.non_latin_share == 0.0 and empty.main_script == "latin"
    assert empty.to_dict()["letters"] == 0


def test_large_registries_are_measured_on_an_even_sample() -> None:
    texts = ["english words only"] * SAMPLE_TEXTS + ["中文"] * SAMPLE_TEXTS    # the sample keeps both halves
    profile = script_profile(texts)
    assert profile.counts["han"] == 2 * (SAMPLE_TEXTS // 2)
    assert 0 < profile.non_latin_share < 1


def test_resolve_language() -> None:
    assert resolve_language("auto", ["获取天气预报"]) == "Chinese"
    assert resolve_language(" AUTO ", ["Get the weather for a city"]) == "English"
    assert resolve_language("German", ["获取天气预报"]) == "German"    # an explicit setting is kept as given


def test_script_families() -> None:
    chinese, japanese, kanji = (script_profile([text]) for text in ("获取天气预报", "明日の天気", "天気予報"))
    english, digits = script_profile(["weather"]), script_profile(["2024 12 31"])
    assert japanese.script_family == kanji.script_family == chinese.script_family == "han"
    assert kanji.shares_script_with(japanese)             # a kanji-only query still meets a Japanese registry
    assert not english.shares_script_with(chinese) and not chinese.shares_script_with(english)
    assert digits.shares_script_with(chinese) and digits.shares_script_with(english)   # no letters: no mismatch
