-- Meters counted live (decisions §16: `verifications`): each instance adds its counts up in memory
-- and writes the sums here every few seconds, one row per developer, meter and UTC day.
CREATE TABLE live_meter_counts (
  developer_id text NOT NULL,
  meter text NOT NULL,
  day date NOT NULL,
  n bigint NOT NULL,
  PRIMARY KEY (developer_id, meter, day)
);
