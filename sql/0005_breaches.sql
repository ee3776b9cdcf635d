-- DPDP breach register (decisions §8).

CREATE TABLE breaches (
  id                             text PRIMARY KEY,
  developer_id                   text NOT NULL REFERENCES developers(id),
  status                         text NOT NULL CHECK (status IN ('open', 'initial_intimated', 'reported', 'closed')),
  description                    text NOT NULL,
  nature                         text NOT NULL,
  extent                         text NOT NULL,
  occurred_at                    timestamptz,
  aware_at                       timestamptz NOT NULL,
  location                       text,
  likely_impact                  text,
  affected_count                 integer NOT NULL,
  affected_principal_ids         text[] NOT NULL DEFAULT '{}',
  ids_given                      boolean NOT NULL,
  mitigation                     text,
  detailed_report                jsonb NOT NULL,
  board_initial_intimation_sent_at timestamptz,
  board_detailed_report_sent_at  timestamptz,
  extension                      jsonb,
  created_at                     timestamptz NOT NULL,
  updated_at                     timestamptz,
  closed_at                      timestamptz
);
CREATE INDEX breaches_list ON breaches (developer_id, created_at DESC, id DESC);
-- the deadline fiber scans breaches whose detailed report is still owed
CREATE INDEX breaches_owed ON breaches (aware_at) WHERE board_detailed_report_sent_at IS NULL AND status <> 'closed';

CREATE TABLE breach_intimations (
  id               text PRIMARY KEY,
  breach_id        text NOT NULL REFERENCES breaches(id),
  channel          text NOT NULL,
  intimated_at     timestamptz NOT NULL,
  principal_count  integer NOT NULL,
  content_included text[] NOT NULL,
  content_missing  text[] NOT NULL,
  created_at       timestamptz NOT NULL
);
CREATE INDEX breach_intimations_breach ON breach_intimations (breach_id, created_at DESC, id DESC);

-- distinct principals told, for intimatedCount / pendingCount
CREATE TABLE breach_intimated_principals (
  breach_id    text NOT NULL REFERENCES breaches(id),
  principal_id text NOT NULL,
  PRIMARY KEY (breach_id, principal_id)
);

-- one alert per stage per due time, across every instance
CREATE TABLE breach_deadline_alerts (
  breach_id  text NOT NULL REFERENCES breaches(id),
  stage      text NOT NULL CHECK (stage IN ('approaching', 'overdue')),
  due_at     timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (breach_id, stage, due_at)
);
