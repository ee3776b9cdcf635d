-- Budget allocations attached to grants (decisions §9) and their debit transactions.
-- Amounts are numeric(20,4): exact decimals, never floating point. A debit is one conditional
-- UPDATE (... WHERE remaining_budget >= amount), so concurrent debits serialise on the row lock and
-- can never overdraw. Token refresh reads remaining_budget by grant_id for the `bdg` claim.

CREATE TABLE budget_allocations (
  id               text PRIMARY KEY,
  grant_id         text NOT NULL UNIQUE REFERENCES grants(id),
  developer_id     text NOT NULL REFERENCES developers(id),
  initial_budget   numeric(20,4) NOT NULL CHECK (initial_budget > 0),
  remaining_budget numeric(20,4) NOT NULL CHECK (remaining_budget >= 0 AND remaining_budget <= initial_budget),
  currency         text NOT NULL,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL
);
CREATE INDEX budget_allocations_developer ON budget_allocations (developer_id, created_at DESC, id DESC);

CREATE TABLE budget_transactions (
  id              text PRIMARY KEY,
  allocation_id   text NOT NULL REFERENCES budget_allocations(id),
  grant_id        text NOT NULL REFERENCES grants(id),
  developer_id    text NOT NULL REFERENCES developers(id),
  amount          numeric(20,4) NOT NULL CHECK (amount > 0),
  remaining_after numeric(20,4) NOT NULL,
  description     text,
  metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at      timestamptz NOT NULL
);
CREATE INDEX budget_transactions_list ON budget_transactions (grant_id, created_at DESC, id DESC);
