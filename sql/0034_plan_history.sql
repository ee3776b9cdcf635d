-- Billing (decisions §16, revised): plan changes are kept with their time, so a close prices each
-- part of a month at the plan in force then. A developer with no change kept has been on its
-- current plan throughout; before its first kept change, on that change's `from_plan`.
CREATE TABLE plan_changes (
  developer_id text NOT NULL REFERENCES developers(id) ON DELETE CASCADE,
  changed_at   timestamptz NOT NULL,
  seq          bigserial,
  from_plan    text NOT NULL,
  to_plan      text NOT NULL,
  PRIMARY KEY (developer_id, changed_at, seq)
);

-- A close that could not invoice every developer stays open and says why (retried each round).
ALTER TABLE billing_periods ADD COLUMN last_error text;
ALTER TABLE billing_periods ADD COLUMN failed_closes integer NOT NULL DEFAULT 0;

-- Each invoice line says which part of the month it prices and at which plan (rows closed before
-- this migration priced the whole month at the invoice's plan).
ALTER TABLE invoice_lines ADD COLUMN plan text;
ALTER TABLE invoice_lines ADD COLUMN period_start timestamptz;
ALTER TABLE invoice_lines ADD COLUMN period_end timestamptz;
