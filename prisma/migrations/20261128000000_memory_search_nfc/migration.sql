-- A memory's search document is made from the NFC form of its content, as the search's terms are
-- from the NFC form of the query: "trà" typed as "a" plus a combining grave accent finds "trà"
-- saved precomposed, and the other way round.
CREATE OR REPLACE FUNCTION agentrun_memory_search_doc() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.search_doc := to_tsvector('english', normalize(NEW.content, NFC));
  RETURN NEW;
END;
$$;

UPDATE "memory_entries" SET "search_doc" = to_tsvector('english', normalize("content", NFC))
WHERE "content" IS NOT NFC NORMALIZED;
