-- SAML (decisions §12): what only SAML needs beside the connections of 0024.
-- Single use of assertion ids: an id is claimed once per connection and kept until the assertion
-- could no longer be accepted anyway (its NotOnOrAfter, capped by the 10-minute age limit, plus the
-- 60 s skew); a claim also purges the rows past their time.
CREATE TABLE sso_saml_assertions (
  connection_id text NOT NULL REFERENCES sso_connections(id) ON DELETE CASCADE,
  assertion_id  text NOT NULL,
  expires_at    timestamptz NOT NULL,
  PRIMARY KEY (connection_id, assertion_id)
);
CREATE INDEX sso_saml_assertions_expires ON sso_saml_assertions (expires_at);
