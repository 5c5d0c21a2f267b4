"""Lexical retrieval: bm25s over stemmed words, with code identifiers split into the words they are made of.

Tool names are identifiers (``getWeatherForecast``, ``stock_code``); a query says "weather forecast", so the
identifier is split into words before stemming. Chinese, Japanese and Korean have no spaces between words, so their
runs are indexed as overlapping character pairs, the usual dictionary-free choice for those scripts.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from a2x_local.errors import UserError
from a2x_local.search.retrieval.config import RetrievalConfig

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_WORD = re.compile(r"(?u)\b\w\w+\b")  # the scikit-learn / bm25s default: words of two or more characters
_TOKENIZE_CHUNK = 10000
_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


def split_identifiers(text: str) -> str:
    """``getHTTPResponse_code`` -> ``get HTTP Response code``."""
    return _CAMEL_BOUNDARY.sub(" ", text).replace("_", " ")


def _cjk_pairs(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i:i + 2] for i in range(len(run) - 1)]


class Bm25Tokenizer:
    """Text -> stemmed tokens, identical for services and queries.

    Written here rather than with ``bm25s.tokenize`` because that one takes only a regex splitter and assigns ids
    per call; this one needs the identifier and CJK steps and must be stateless between index and query time. The
    steps and their order are bm25s's: lower-case, split, drop stop words, stem.
    """

    def __init__(self, config: RetrievalConfig) -> None:
        self.split = config.split_identifiers
        self.cjk = config.cjk_bigrams
        if config.bm25_stopwords == "en":
            from bm25s.stopwords import STOPWORDS_EN

            self.stopwords = frozenset(STOPWORDS_EN)
        else:
            self.stopwords = frozenset()
        self.stemmer = None
        if config.bm25_stemmer.lower() != "none":
            import Stemmer

            try:
                self.stemmer = Stemmer.Stemmer(config.bm25_stemmer)
            except KeyError as exc:
                raise UserError(f"unknown stemmer language '{config.bm25_stemmer}'",
                                hint=f"one of: none, {', '.join(Stemmer.algorithms())}") from exc

    def words(self, text: str) -> list[str]:
        if self.split:
            text = split_identifiers(text)
        text = text.lower()
        if not self.cjk:
            return [w for w in _WORD.findall(text) if w not in self.stopwords]
        words: list[str] = []
        start = 0
        for match in _CJK_RUN.finditer(text):
            words.extend(w for w in _WORD.findall(text[start:match.start()]) if w not in self.stopwords)
            words.extend(_cjk_pairs(match.group()))
            start = match.end()
        words.extend(w for w in _WORD.findall(text[start:]) if w not in self.stopwords)
        return words

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        docs = [self.words(text) for text in texts]
        if self.stemmer is None:
            return docs
        return [self.stemmer.stemWords(doc) for doc in docs]


class Bm25Index:
    """A bm25s index whose document i is service ``ids[i]``."""

    FOLDER = "bm25s"

    def __init__(self, retriever: object, ids: list[str], tokenizer: Bm25Tokenizer) -> None:
        self.retriever = retriever
        self.ids = ids
        self.tokenizer = tokenizer

    @classmethod
    def build(cls, texts: Sequence[str], ids: list[str], config: RetrievalConfig) -> Bm25Index:
        import bm25s

        tokenizer = Bm25Tokenizer(config)
        # Tokens become ids chunk by chunk, each document a 4-byte array: a million documents of Python strings
        # would take gigabytes before bm25s builds its matrix (bm25s takes (ids, vocabulary) and scores the same).
        vocabulary: dict[str, int] = {}
        corpus: list[array] = []
        for start in range(0, len(texts), _TOKENIZE_CHUNK):
            for tokens in tokenizer.tokenize(texts[start:start + _TOKENIZE_CHUNK]):
                # An empty document would give bm25s an empty row; a placeholder token that no query can produce
                # (queries are lower-cased and split on non-word characters) keeps the row without matching anything.
                corpus.append(array("I", [vocabulary.setdefault(t, len(vocabulary)) for t in tokens or ["\x00empty"]]))
        retriever = bm25s.BM25(method=config.bm25_method, k1=config.bm25_k1, b=config.bm25_b)
        retriever.index((corpus, vocabulary), show_progress=False)
        return cls(retriever, ids, tokenizer)

    def save(self, folder: Path) -> None:
        self.retriever.save(str(folder / self.FOLDER), show_progress=False)

    @classmethod
    def load(cls, folder: Path, ids: list[str], config: RetrievalConfig) -> Bm25Index:
        import bm25s

        # Memory-mapped: a query reads the score columns of its own words, so a million-service index costs the
        # pages queries touch, not the whole matrix.
        retriever = bm25s.BM25.load(str(folder / cls.FOLDER), mmap=True, show_progress=False)
        if retriever.scores["num_docs"] != len(ids):
            raise UserError(f"{folder}: BM25 index holds {retriever.scores['num_docs']} documents"
                            f" for {len(ids)} services", hint="run `a2x-local index --force` to rebuild it")
        return cls(retriever, ids, Bm25Tokenizer(config))

    def scores(self, queries: Sequence[str]) -> np.ndarray:
        """BM25 score of every service for every query: shape (queries, services)."""
        out = np.zeros((len(queries), len(self.ids)), dtype=np.float32)
        for row, tokens in enumerate(self.tokenizer.tokenize(queries)):
            known = [token for token in tokens if token in self.retriever.vocab_dict]
            if known:
                out[row] = self.retriever.get_scores(known)
        return out

    def search(self, queries: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        """Top ``k`` (row, score) per query, best first; services scoring 0 (no shared word) are left out."""
        results = []
        for scores in self.scores(queries):
            results.append(top_rows(scores, k))
        return results


def top_rows(scores: np.ndarray, k: int) -> list[tuple[int, float]]:
    """Rows with a positive score, best first, ties in row order (deterministic)."""
    positive = np.flatnonzero(scores > 0)
    if positive.size == 0:
        return []
    if positive.size > k:
        values = scores[positive]
        kth = np.partition(values, positive.size - k)[positive.size - k]
        above, tied = positive[values > kth], positive[values == kth]
        positive = np.concatenate([above, tied[: k - above.size]])
    order = np.lexsort((positive, -scores[positive]))
    return [(int(positive[i]), float(scores[positive[i]])) for i in order]
