-- DPDP nomination (decisions §21, ours, minimal): the person a data principal nominates to exercise
-- their rights on death or incapacity (s.14). One per principal; erased with the principal.
CREATE TABLE dpdp_nominations (
  id                    text PRIMARY KEY,
  developer_id          text NOT NULL REFERENCES developers(id),
  data_principal_id     text NOT NULL,
  nominee_principal_id  text NOT NULL,
  effective_on          text NOT NULL CHECK (effective_on IN ('death_or_incapacity')),
  created_at            timestamptz NOT NULL,
  updated_at            timestamptz NOT NULL,
  UNIQUE (developer_id, data_principal_id)
);
