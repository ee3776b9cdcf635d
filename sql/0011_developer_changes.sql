-- Every instance caches resolved API keys for a few seconds. A change to a developer (key rotation,
-- plan, settings), by the service or by an operator command, notifies them when it commits, so each
-- drops its entry at once (src/platform/Auth.ts listens on this channel).
CREATE FUNCTION notify_developer_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('developer_changes', NEW.id);
  RETURN NULL;
END
$$;
CREATE TRIGGER developer_changed AFTER UPDATE ON developers FOR EACH ROW EXECUTE FUNCTION notify_developer_change();
