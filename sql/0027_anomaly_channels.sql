-- Anomaly alert channels (decisions §14): a channel is a row of webhook_endpoints of another kind,
-- so the delivery worker claims, signs, retries, pins and caps its deliveries like any endpoint's,
-- and its history lives in webhook_deliveries. Channels are hidden from /v1/webhooks and its plan cap.
-- A Slack channel's url column holds the masked form; the real URL (itself a secret) is sealed in
-- secret_ciphertext, like a webhook secret.
ALTER TABLE webhook_endpoints ADD COLUMN kind text NOT NULL DEFAULT 'endpoint'
  CHECK (kind IN ('endpoint', 'anomaly_webhook', 'anomaly_slack'));
ALTER TABLE webhook_endpoints ADD COLUMN name text;
-- the alert severities a channel receives (all four unless the developer chose)
ALTER TABLE webhook_endpoints ADD COLUMN severities text[];
-- every emitted event looks up its developer's subscribed endpoints: channels stay out of that probe
CREATE INDEX webhook_endpoints_subscribed ON webhook_endpoints (developer_id) WHERE deleted_at IS NULL AND kind = 'endpoint';
CREATE INDEX webhook_endpoints_channels ON webhook_endpoints (developer_id, created_at DESC, id DESC)
  WHERE deleted_at IS NULL AND kind <> 'endpoint';

-- The channels that receive one anomaly.detected event (its data: alertId, ruleId, severity, ...):
-- the developer's live channels taking its severity; when the alert's rule is a custom rule that
-- names channels (alertChannels), only those. Called by every outbox insert (platform/Events.ts
-- insertDeliveriesSql) in the emitting statement, so an alert and its deliveries commit together.
-- The custom rules live in anomaly_rules (developer_id, rule_id, alert_channels text[]), created by
-- the anomalies migration: until that table exists, every channel receives every alert; if its
-- columns differ, the alert is still delivered to all channels rather than the alert failing.
CREATE FUNCTION anomaly_alert_channels(p_developer_id text, p_data jsonb) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
  named text[];
BEGIN
  IF to_regclass('anomaly_rules') IS NOT NULL THEN
    BEGIN
      EXECUTE 'SELECT alert_channels FROM anomaly_rules WHERE developer_id = $1 AND rule_id = $2'
        INTO named USING p_developer_id, p_data->>'ruleId';
    EXCEPTION WHEN undefined_column OR undefined_table OR datatype_mismatch OR invalid_text_representation OR cannot_coerce THEN
      named := NULL;
    END;
  END IF;
  RETURN QUERY
    SELECT e.id FROM webhook_endpoints e
    WHERE e.developer_id = p_developer_id AND e.kind <> 'endpoint' AND e.deleted_at IS NULL
      AND (e.severities IS NULL OR (p_data->>'severity') = ANY (e.severities))
      AND (named IS NULL OR cardinality(named) = 0 OR e.id = ANY (named));
END
$$;
