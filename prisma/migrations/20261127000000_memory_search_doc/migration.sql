-- Each memory entry keeps its full-text search document, computed once when it is written: a
-- search reads it instead of parsing every entry of the user again (to_tsvector over 4,000
-- characters, for each entry, on every run's prompt and every memory_search).
ALTER TABLE "memory_entries" ADD COLUMN "search_doc" tsvector;

CREATE FUNCTION agentrun_memory_search_doc() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.search_doc := to_tsvector('english', NEW.content);
  RETURN NEW;
END;
$$;

CREATE TRIGGER memory_entries_search_doc
  BEFORE INSERT OR UPDATE OF content ON "memory_entries"
  FOR EACH ROW EXECUTE FUNCTION agentrun_memory_search_doc();

UPDATE "memory_entries" SET "search_doc" = to_tsvector('english', "content");
