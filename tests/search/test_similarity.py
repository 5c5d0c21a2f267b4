"""Cosines of texts with given services in the dense index's space (compose's Eq. 4 and confidence), with the real
all-MiniLM-L6-v2 weights on the ten-service registry."""

from __future__ import annotations

from pathlib import Path

from a2x_local.search import make_method, open_similarity
from a2x_local.settings import load_settings


def test_cosines_backgrounds_and_top(registry_db: Path) -> None:
    settings = load_settings(db=registry_db)
    hybrid = make_method("hybrid", settings, registry_db)
    similarity = open_similarity(settings, registry_db, method=hybrid)
    assert similarity.index is hybrid.dense.index and similarity.embedder is hybrid.dense.embedder   # no copy
    text = "weather forecast for Paris this weekend"
    [[weather, email, missing]] = similarity.cosines([text], [["weather", "email", "nope"]])
    assert missing is None and weather > email and 0 < weather <= 1
    [[best, *_]] = similarity.top([text], 3)
    assert best[0] == "weather" and abs(best[1] - weather) < 1e-5
    [background] = similarity.background([text])
    assert background.mean < weather and background.z(weather) > background.z(email) > -5
    [padded] = similarity.background([text], similarity.encode_passages(["Send an SMS", "Play a song"]))
    assert padded.mean != background.mean


def test_query_vectors_are_kept_between_calls(registry_db: Path, monkeypatch) -> None:
    """The embedder keeps recent query vectors: a step searched by hybrid, then probed and scored, is encoded once."""
    settings = load_settings(db=registry_db)
    hybrid = make_method("hybrid", settings, registry_db)
    similarity = open_similarity(settings, registry_db, method=hybrid)
    model = similarity.embedder.query_model     # what encodes queries (the NumPy runtime for MiniLM)
    encoded: list[list[str]] = []
    original = model.encode

    def counting(texts, **options):
        if options.get("query"):
            encoded.append(list(texts))
        return original(texts, **options)

    monkeypatch.setattr(model, "encode", counting)
    first = hybrid.retrieve(["book a hotel", "send mail"], 3)
    similarity.cosines(["book a hotel", "send mail"], [["hotels"], ["email"]])
    similarity.background(["book a hotel"])
    similarity.top(["send mail", "book a hotel", "new text"], 2)
    assert encoded == [["book a hotel", "send mail"], ["new text"]]
    assert hybrid.retrieve(["book a hotel", "send mail"], 3) == first           # kept vectors, same answers
