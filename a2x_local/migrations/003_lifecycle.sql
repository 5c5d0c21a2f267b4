-- The registry's life between builds: sync removals, tree versions derived from a parent, and cached model answers.

-- `ingest --sync` removes services; 'sync' marks such runs.
ALTER TABLE ingest_runs ADD COLUMN removed INTEGER DEFAULT 0;
ALTER TABLE ingest_runs ADD COLUMN sync BOOLEAN DEFAULT FALSE;

-- A tree made from another one (kind 'update': incremental placement, re-split of over-full leaves) names it.
ALTER TABLE builds ADD COLUMN parent_id INTEGER;

-- What a build did not pay for: answers read from the cache instead of sent to the model.
ALTER TABLE build_usage ADD COLUMN cached INTEGER DEFAULT 0;
ALTER TABLE build_usage ADD COLUMN cached_prompt_tokens BIGINT DEFAULT 0;
ALTER TABLE build_usage ADD COLUMN cached_completion_tokens BIGINT DEFAULT 0;

-- Deterministic model answers by (model, answer-changing engine settings, constraint, prompt, budget).
CREATE TABLE llm_cache (
    key               TEXT PRIMARY KEY,          -- SHA-256 of everything that decides the answer
    model             TEXT NOT NULL,             -- for people and for pruning by model
    call_type         TEXT NOT NULL,
    text              TEXT NOT NULL,             -- the raw answer, validated again when read
    prompt_tokens     INTEGER NOT NULL,          -- what the answer cost when it was sent
    completion_tokens INTEGER NOT NULL,
    created_at        TIMESTAMP NOT NULL,
    used_at           TIMESTAMP NOT NULL,
    hits              INTEGER NOT NULL DEFAULT 0
);
