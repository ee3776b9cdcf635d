-- DPDP grievances and their 90-day clock (decisions §21).

CREATE TABLE dpdp_grievances (
  id                     text PRIMARY KEY,
  developer_id           text NOT NULL REFERENCES developers(id),
  reference_number       text NOT NULL UNIQUE,
  data_principal_id      text NOT NULL,
  record_id              text REFERENCES dpdp_consent_records(id),
  type                   text NOT NULL,
  description            text NOT NULL,
  evidence               jsonb,
  status                 text NOT NULL CHECK (status IN ('submitted', 'under_review', 'resolved', 'escalated')),
  outcome                text CHECK (outcome IN ('upheld', 'partially_upheld', 'rejected')),
  resolution             text,
  expected_resolution_by timestamptz NOT NULL,
  statutory_due_at       timestamptz NOT NULL,
  resolved_at            timestamptz,
  updated_at             timestamptz,
  created_at             timestamptz NOT NULL
);
CREATE INDEX dpdp_grievances_list ON dpdp_grievances (developer_id, created_at DESC, id DESC);
CREATE INDEX dpdp_grievances_principal ON dpdp_grievances (developer_id, data_principal_id) WHERE status IN ('submitted', 'under_review');
-- the deadline fiber scans open grievances only
CREATE INDEX dpdp_grievances_open ON dpdp_grievances (statutory_due_at) WHERE status IN ('submitted', 'under_review');

CREATE TABLE dpdp_grievance_history (
  grievance_id text NOT NULL REFERENCES dpdp_grievances(id),
  seq          integer NOT NULL,
  status       text NOT NULL,
  note         text,
  at           timestamptz NOT NULL,
  PRIMARY KEY (grievance_id, seq)
);

-- one alert per (grievance, stage, due time), across every instance
CREATE TABLE dpdp_grievance_deadline_alerts (
  grievance_id text NOT NULL REFERENCES dpdp_grievances(id),
  stage        text NOT NULL CHECK (stage IN ('target_missed', 'statutory_approaching', 'statutory_overdue')),
  due_at       timestamptz NOT NULL,
  created_at   timestamptz NOT NULL,
  PRIMARY KEY (grievance_id, stage, due_at)
);
