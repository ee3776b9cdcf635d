-- Billing (decisions §16): plans, closed periods, invoices and their lines, threshold notices.
-- Plans are upserted at start from the defaults or PLANS_FILE; developers.plan names one of them.

CREATE TABLE plans (
  code        text PRIMARY KEY,
  name        text NOT NULL,
  limits      jsonb NOT NULL,
  monthly_fee numeric(20,4) NOT NULL DEFAULT 0,
  currency    text NOT NULL DEFAULT 'USD',
  -- meter -> unit price per 1,000 units (text, read as numeric: never a float)
  overage     jsonb NOT NULL DEFAULT '{}',
  updated_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO plans (code, name, limits) VALUES
  ('free', 'Free', '{}'), ('pro', 'Pro', '{}'), ('enterprise', 'Enterprise', '{}');

-- Operators can add plans: the fixed list gives way to a reference.
ALTER TABLE developers DROP CONSTRAINT IF EXISTS developers_plan_check;
ALTER TABLE developers ADD CONSTRAINT developers_plan_fkey FOREIGN KEY (plan) REFERENCES plans(code);

-- One row per month being closed; the closer holds its row lock (FOR UPDATE SKIP LOCKED) for the
-- whole close, so instances close a month once, and a crash rolls the close back to be redone.
CREATE TABLE billing_periods (
  period_start timestamptz PRIMARY KEY,
  period_end   timestamptz NOT NULL,
  closed_at    timestamptz
);

CREATE TABLE invoices (
  id           text PRIMARY KEY,
  developer_id text NOT NULL REFERENCES developers(id),
  plan         text NOT NULL,
  period_start timestamptz NOT NULL,
  period_end   timestamptz NOT NULL,
  status       text NOT NULL CHECK (status IN ('draft', 'open', 'paid', 'void')),
  currency     text NOT NULL,
  total        numeric(20,4) NOT NULL,
  -- meter -> quantity measured from durable rows at close
  usage        jsonb NOT NULL,
  issued_at    timestamptz NOT NULL,
  paid_at      timestamptz,
  UNIQUE (developer_id, period_start)
);
CREATE INDEX invoices_developer ON invoices (developer_id, issued_at DESC, id DESC);

CREATE TABLE invoice_lines (
  invoice_id text NOT NULL REFERENCES invoices(id),
  line_no    integer NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('fee', 'overage')),
  meter      text,
  quantity   bigint NOT NULL,
  unit_price numeric(20,4) NOT NULL,
  amount     numeric(20,4) NOT NULL,
  PRIMARY KEY (invoice_id, line_no)
);

-- billing.quota.threshold is emitted once per (developer, meter, period, pct): the insert decides.
CREATE TABLE billing_thresholds (
  developer_id text NOT NULL,
  meter        text NOT NULL,
  period_start timestamptz NOT NULL,
  pct          integer NOT NULL,
  created_at   timestamptz NOT NULL,
  PRIMARY KEY (developer_id, meter, period_start, pct)
);

-- Meters count durable rows by developer and time.
CREATE INDEX IF NOT EXISTS auth_requests_developer_created ON auth_requests (developer_id, created_at);
CREATE INDEX IF NOT EXISTS grant_tokens_developer_issued ON grant_tokens (developer_id, issued_at);
CREATE INDEX IF NOT EXISTS events_developer_type_created ON events (developer_id, type, created_at);
