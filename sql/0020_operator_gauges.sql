-- Scrape-time gauges of /metrics (issue 18): the oldest pending webhook delivery and the open
-- breaches are each one index-bounded query, whatever the size of the tables.
CREATE INDEX IF NOT EXISTS webhook_deliveries_pending_created ON webhook_deliveries (created_at) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS breaches_open ON breaches (aware_at) WHERE status <> 'closed';
