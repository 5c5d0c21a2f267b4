-- The gateway's audit: one row per call through `a2x-local serve` (allowed or refused), appended by the server.
-- Arguments and results are kept as a SHA-256 and a redacted preview (keys and value types); their text only when
-- the owner turns on [gateway] audit_text. `a2x-local audit` lists, filters and exports the rows.
CREATE SEQUENCE gateway_call_ids START 1;

CREATE TABLE gateway_calls (
    id                BIGINT PRIMARY KEY DEFAULT nextval('gateway_call_ids'),
    called_at         TIMESTAMP NOT NULL,        -- UTC, when the call arrived
    profile           TEXT NOT NULL,             -- the caller's profile
    client            TEXT NOT NULL,             -- stdio | anonymous | token:<first 8 hex of the token's SHA-256>
    via               TEXT NOT NULL,             -- call_service | tool (dynamic mode) | http
    service_id        TEXT NOT NULL,
    server            TEXT,                      -- the MCP server, when the service names one
    tool              TEXT,
    arguments_sha256  TEXT,
    arguments_preview TEXT,                      -- keys and value types, never values
    arguments_bytes   INTEGER,
    duration_ms       DOUBLE NOT NULL,
    outcome           TEXT NOT NULL,             -- ok | tool_error | denied | invalid | too_large | failed | timeout | busy | cancelled
    result_bytes      INTEGER,
    error             TEXT,                      -- the error code and message the caller was given
    arguments_text    TEXT,                      -- only with [gateway] audit_text
    result_text       TEXT                       -- only with [gateway] audit_text
);
