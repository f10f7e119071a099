-- Why a completed run's answer ended early, as its model said: `length` (its token limit) or
-- `content_filter`. NULL for an answer the model finished.
ALTER TABLE "runs" ADD COLUMN "finish_reason" TEXT;
