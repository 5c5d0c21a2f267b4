-- Versioned taxonomy trees: one build record per build or import, its nodes, memberships and token accounting.
CREATE SEQUENCE build_ids START 1;

CREATE TABLE builds (
    id                   INTEGER PRIMARY KEY DEFAULT nextval('build_ids'),
    kind                 TEXT NOT NULL,          -- 'build' or 'import'
    created_at           TIMESTAMP NOT NULL,
    finished_at          TIMESTAMP,
    status               TEXT NOT NULL,          -- running | completed | failed
    model                TEXT,
    engine               TEXT,
    engine_settings      JSON,
    thresholds           JSON,
    prompt_hash          TEXT,
    registry_fingerprint TEXT NOT NULL,
    service_count        INTEGER NOT NULL,
    rounds               INTEGER NOT NULL DEFAULT 0,
    wall_seconds         DOUBLE NOT NULL DEFAULT 0,
    stats                JSON,
    error                TEXT,
    source               TEXT                    -- imported file, when kind = 'import'
);

CREATE TABLE tree_nodes (
    build_id      INTEGER NOT NULL,
    node_id       TEXT NOT NULL,
    parent_id     TEXT,
    depth         INTEGER NOT NULL,
    position      INTEGER NOT NULL,              -- order among siblings
    name          TEXT NOT NULL,
    description   TEXT NOT NULL,
    boundary      TEXT NOT NULL DEFAULT '',
    decision_rule TEXT NOT NULL DEFAULT '',
    keywords      JSON,
    PRIMARY KEY (build_id, node_id)
);

CREATE TABLE tree_membership (
    build_id   INTEGER NOT NULL,
    node_id    TEXT NOT NULL,
    service_id TEXT NOT NULL,
    PRIMARY KEY (build_id, node_id, service_id)
);

CREATE TABLE build_usage (
    build_id          INTEGER NOT NULL,
    call_type         TEXT NOT NULL,
    calls             INTEGER NOT NULL,
    prompt_tokens     BIGINT NOT NULL,
    completion_tokens BIGINT NOT NULL,
    failures          INTEGER NOT NULL,
    retries           INTEGER NOT NULL,
    seconds           DOUBLE NOT NULL,
    PRIMARY KEY (build_id, call_type)
);

-- Resumable builds: the whole in-progress state after each finished engine round.
CREATE TABLE build_checkpoints (
    build_id   INTEGER NOT NULL,
    round      INTEGER NOT NULL,
    stage      TEXT NOT NULL,
    state      JSON NOT NULL,
    created_at TIMESTAMP NOT NULL,
    PRIMARY KEY (build_id, round)
);

-- Which completed tree answers searches. Exactly one row once any tree is active.
CREATE TABLE active_tree (
    singleton    BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (singleton),
    build_id     INTEGER NOT NULL,
    activated_at TIMESTAMP NOT NULL
);
