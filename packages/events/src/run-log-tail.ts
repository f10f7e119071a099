import type { Redis } from "ioredis";
import { runLogKey } from "./keys";

/**
 * The index of the first entry of a run's log that can hold an event with seq > ARGV[1], found in
 * Redis by a binary search over the entries' seqs (O(log n) LINDEX), and the entries from there
 * on, at most ARGV[2] of them: a reader resuming near the end of a log of millions of events gets
 * a few entries, not the whole list (one LRANGE 0 -1 of such a log took seconds of Redis and of
 * the reader's connection, shared with every other command of its process, and gigabytes of its
 * memory). The last entry is always among them (a log that exists is never answered empty): its
 * reader tells from it whether the run ended before what it holds, and an empty answer that the
 * log is gone.
 *
 * Each entry holds one event, or a JSON array of events with consecutive seqs, and entries are
 * appended in seq order: a run's log has one writer at a time (see run-log-append), each numbering
 * its events after the last one stored anywhere, and a writer taken over can append nothing more.
 * A stored terminal event published again comes after itself. So the entries' last seqs never
 * decrease. An entry whose seq cannot be read (not JSON, no seq) counts as one that may hold later
 * events: the search goes to its left, reading more rather than skipping anything.
 *
 * KEYS[1] the log; ARGV[1] the seq read after, ARGV[2] the most entries to return.
 * Returns { index of the first entry returned, entries }; {0, {}} when the log does not exist.
 */
const TAIL_LUA = `
local n = redis.call('LLEN', KEYS[1])
if n == 0 then return {0, {}} end
local after = tonumber(ARGV[1])
local function lastSeq(i)
  local ok, v = pcall(cjson.decode, redis.call('LINDEX', KEYS[1], i))
  if not ok or type(v) ~= 'table' then return nil end
  if type(v.seq) == 'number' then return v.seq end
  local last = nil
  for _, e in ipairs(v) do
    if type(e) == 'table' and type(e.seq) == 'number' and (last == nil or e.seq > last) then last = e.seq end
  end
  return last
end
local lo, hi = 0, n - 1
while lo < hi do
  local mid = math.floor((lo + hi) / 2)
  local s = lastSeq(mid)
  if s ~= nil and s <= after then lo = mid + 1 else hi = mid end
end
return {lo, redis.call('LRANGE', KEYS[1], lo, lo + tonumber(ARGV[2]) - 1)}
`;

/**
 * Entries per read of a log: a reader from the start of a long log reads it in pieces, so that
 * the other commands of its connection (rate limits, health checks) go between them rather than
 * wait behind one reply of millions of entries (its commands time out after 5 s).
 */
export const LOG_PAGE_ENTRIES = 10_000;

/**
 * The entries of a run's Redis log, oldest first, from the first one that can hold an event with
 * seq > `afterSeq`, and always its last one; empty when the log does not exist. Entries appended
 * while the pages are read are included; a log deleted meanwhile ends the read where it is.
 */
export async function readLogAfter(store: { redis: Redis; redisPrefix: string }, runId: string, afterSeq: number): Promise<string[]> {
  const { redis } = store;
  const key = runLogKey(store.redisPrefix, runId);
  // EVAL, not a command defined on the connection: with auto-pipelining, a pipeline begun before
  // the definition has no such method, and ioredis then fails the whole pipeline and the process
  // (seen under concurrent reads). Redis caches the compiled script by its hash.
  const [start, first] = (await redis.eval(TAIL_LUA, 1, key, afterSeq, LOG_PAGE_ENTRIES)) as [number, string[]];
  const entries = [...first];
  // Entries are only ever appended (or the whole log deleted): the indexes past `start` stay.
  let last = first.length;
  while (last === LOG_PAGE_ENTRIES) {
    const from = start + entries.length;
    const page = await redis.lrange(key, from, from + LOG_PAGE_ENTRIES - 1);
    for (const entry of page) entries.push(entry);
    last = page.length;
  }
  return entries;
}
