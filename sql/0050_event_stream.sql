-- decisions §23: GET /v1/events/stream reads the outbox in commit-safe order. Each event records the
-- transaction that wrote it (xid) and its place in it (seq); a reader streams only events whose
-- transaction is older than every transaction still running (pg_snapshot_xmin), ordered by (xid, seq),
-- so an event that commits late can never land behind a position a client has already passed.
ALTER TABLE events ADD COLUMN seq bigserial;
ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX events_stream ON events (developer_id, xid, seq);
