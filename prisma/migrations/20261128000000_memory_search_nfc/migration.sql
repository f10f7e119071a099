-- A memory's search document is made from the NFC form of its content, as the search's terms are
-- from the NFC form of the query: "trà" typed as "a" plus a combining grave accent finds "trà"
-- saved precomposed, and the other way round. PostgreSQL normalizes only in a UTF8 database;
-- in another encoding (SQL_ASCII, LATIN1) text is taken as it is.
CREATE FUNCTION agentrun_nfc(t text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
BEGIN
  IF current_setting('server_encoding') = 'UTF8' THEN
    RETURN normalize(t, NFC);
  END IF;
  RETURN t;
END;
$$;

CREATE OR REPLACE FUNCTION agentrun_memory_search_doc() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.search_doc := to_tsvector('english', agentrun_nfc(NEW.content));
  RETURN NEW;
END;
$$;

UPDATE "memory_entries" SET "search_doc" = to_tsvector('english', agentrun_nfc("content"))
WHERE agentrun_nfc("content") <> "content";
