-- Pausing a webhook endpoint (decisions §7, revised): while `enabled` is false its new deliveries
-- are stored as `held` (never claimed), and enabling it turns the held ones of the last 7 days back
-- into `pending`, oldest first. Older held deliveries become `failed` ("held longer than 7 days").
ALTER TABLE webhook_endpoints ADD COLUMN enabled boolean NOT NULL DEFAULT true;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_status_check;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_status_check
  CHECK (status IN ('pending', 'held', 'delivered', 'failed'));
-- enabling an endpoint releases its held deliveries oldest first; expiry looks at the oldest
CREATE INDEX webhook_deliveries_held ON webhook_deliveries (endpoint_id, created_at, id) WHERE status = 'held';
