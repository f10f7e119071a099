-- A CORS preflight of the widget API (no key yet) asks whether any widget key lists its origin:
-- answer it from an index of the keys' origins rather than a scan of every key.
CREATE INDEX "widget_keys_allowed_origins_idx" ON "widget_keys" USING GIN ("allowed_origins");
