-- Services and the ingest runs that brought them in.
CREATE TABLE services (
    id           TEXT PRIMARY KEY,
    type         TEXT NOT NULL,
    name         TEXT NOT NULL,
    description  TEXT NOT NULL,
    metadata     JSON,
    source       TEXT,
    content_hash TEXT NOT NULL,
    created_at   TIMESTAMP NOT NULL,
    updated_at   TIMESTAMP NOT NULL
);

CREATE SEQUENCE ingest_run_ids START 1;

CREATE TABLE ingest_runs (
    id          INTEGER PRIMARY KEY DEFAULT nextval('ingest_run_ids'),
    started_at  TIMESTAMP NOT NULL,
    finished_at TIMESTAMP,
    paths       JSON NOT NULL,
    format      TEXT NOT NULL,
    replace     BOOLEAN NOT NULL,
    added       INTEGER NOT NULL DEFAULT 0,
    updated     INTEGER NOT NULL DEFAULT 0,
    unchanged   INTEGER NOT NULL DEFAULT 0,
    conflicts   INTEGER NOT NULL DEFAULT 0,
    status      TEXT NOT NULL,
    message     TEXT
);

-- Per-registry settings (for example the embedding model used by dense retrieval).
CREATE TABLE registry_settings (
    key        TEXT PRIMARY KEY,
    value      JSON NOT NULL,
    updated_at TIMESTAMP NOT NULL
);

-- Free-form event log for later stages (builds, updates, serving).
CREATE SEQUENCE event_ids START 1;

CREATE TABLE events (
    id       INTEGER PRIMARY KEY DEFAULT nextval('event_ids'),
    occurred_at TIMESTAMP NOT NULL,
    kind     TEXT NOT NULL,
    message  TEXT NOT NULL,
    details  JSON
);
