-- The chain head keeps the hash it replaced, so one UPDATE can lock the head, chain the next hash in
-- SQL from the old one and return both to the entry's INSERT in the same statement (issue 37: a
-- developer's appends hold the head for one round trip fewer). Nothing else reads it.
ALTER TABLE audit_heads ADD COLUMN prev_hash text;
