-- Which a2x-local wrote to this registry: each new version, commit or offline bundle that opens the file for
-- writing adds a row (the schema before and after its migrations), so an upgrade is traceable (`a2x-local stats`).
-- Files created before this migration show their earlier migrations in schema_migrations only.
CREATE TABLE software_history (
    seen_at      TIMESTAMP NOT NULL,
    version      TEXT NOT NULL,
    commit_id    TEXT,                    -- NULL: a source tree, or a wheel built without provenance
    dirty        BOOLEAN NOT NULL,
    bundle_id    TEXT,
    schema_from  INTEGER NOT NULL,
    schema_to    INTEGER NOT NULL
);
