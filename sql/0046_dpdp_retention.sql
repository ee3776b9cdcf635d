-- DPDP retention (decisions §21): the DPDP fiber deletes records past retention_until and grievances
-- resolved longer ago than the developer's consentRecordRetentionDays.
CREATE INDEX dpdp_consent_records_retention ON dpdp_consent_records (retention_until);
CREATE INDEX dpdp_grievances_resolved ON dpdp_grievances (resolved_at) WHERE status = 'resolved';
