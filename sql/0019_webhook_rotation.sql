-- Webhook secret rotation (issue 17): the secret a rotation replaced stays valid until
-- previous_secret_expires_at (24 hours); deliveries until then carry a signature by each secret.
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_ciphertext text;
ALTER TABLE webhook_endpoints ADD COLUMN previous_secret_expires_at timestamptz;
-- replay scans one endpoint's deliveries in a time window, oldest first
CREATE INDEX webhook_deliveries_replay ON webhook_deliveries (endpoint_id, created_at, id);
