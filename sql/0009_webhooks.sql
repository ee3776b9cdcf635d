-- Webhook deliveries: the worker's claim scans pending rows by due time (index in 0001); nothing more needed.
SELECT 1;
