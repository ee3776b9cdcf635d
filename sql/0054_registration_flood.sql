-- AD-012 registration flood (decisions §22.9): each dynamic client registration is a signal with
-- the network (IPv4 /24, IPv6 /48) it came from, counted per developer and per network.
ALTER TABLE anomaly_signals ADD COLUMN network text;
CREATE INDEX anomaly_signals_network ON anomaly_signals (developer_id, kind, network, created_at) WHERE network IS NOT NULL;
