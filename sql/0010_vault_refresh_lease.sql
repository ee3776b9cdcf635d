-- Upstream refresh under a lease instead of a row lock held through the upstream call: an exchange
-- claims the lease in one short statement, calls the token endpoint holding no database connection,
-- and stores the answer only while its lease still stands. A lease outlives the call's timeout, so a
-- crashed refresher's lease runs out and the next exchange takes over.
ALTER TABLE vault_credentials ADD COLUMN refresh_lease text;
ALTER TABLE vault_credentials ADD COLUMN refresh_lease_until timestamptz;
