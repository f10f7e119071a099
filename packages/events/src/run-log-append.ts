import type { ChainableCommander, Redis } from "ioredis";
import { RUN_LOG_TTL_LIVE_S } from "./keys";

/**
 * Appends a run's events to its Redis log and publishes them, unless another writer has taken
 * the run over. A run has one writer at a time: the worker executing it, or whoever ends it in
 * its stead (a sweeper, a forced cancel, a worker taking over a stalled job). That one first sets
 * the run's writer key to its own token (see {@link takeOverRunWriter}); from then on the
 * previous writer's appends are refused here, atomically with the append, so a worker that is
 * still alive after its run was ended elsewhere (a long pause, a Redis restart that lost its
 * heartbeat) can never add events after the run's terminal event.
 *
 * KEYS[1] the log, KEYS[2] the writer key, KEYS[3..] keys deleted with this append (the terminal
 * event's). ARGV[1] the writer's token, ARGV[2] the channel, ARGV[3] the message to publish,
 * ARGV[4] the log's TTL in seconds ("0": leave it, unless the append creates the log), ARGV[5..] the events.
 * Returns 1, or 0 when refused.
 *
 * The writer key lives as long as the log: a writer with a token sets it when it is missing (its
 * worker sets it when claiming the run; Redis may have lost it since), and gives it the log's TTL.
 * So for a running run, a missing key means Redis lost the run's state since its last append: a
 * taker then knows that events its worker published may be in neither store (see finishRun).
 */
const APPEND_LUA = `
local writer = redis.call('GET', KEYS[2])
if writer and writer ~= ARGV[1] then return 0 end
if not writer and ARGV[1] ~= '' then redis.call('SET', KEYS[2], ARGV[1], 'EX', ${RUN_LOG_TTL_LIVE_S}) end
local ttl = ARGV[4]
for i = 5, #ARGV, 1000 do
  local last = math.min(i + 999, #ARGV)
  -- A log this append creates (Redis lost it) gets an expiry whatever the writer asked.
  if redis.call('RPUSH', KEYS[1], unpack(ARGV, i, last)) == last - 4 and ttl == '0' then ttl = '${RUN_LOG_TTL_LIVE_S}' end
end
for i = 3, #KEYS do redis.call('DEL', KEYS[i]) end
if ttl ~= '0' then
  redis.call('EXPIRE', KEYS[1], ttl)
  if ARGV[1] ~= '' then redis.call('EXPIRE', KEYS[2], ttl) end
end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return 1
`;

const COMMAND = "agentrunAppendRunEvents";

export interface RunLogAppend {
  logKey: string;
  writerKey: string;
  deleteKeys: string[];
  token: string;
  channel: string;
  message: string;
  ttlS: number;
  events: string[];
}

type WithAppend = { [COMMAND](numKeys: number, ...args: (string | number)[]): unknown };

/** Makes the append command known to `redis` and to the pipelines it creates from now on. */
export function defineRunLogAppend(redis: Redis): void {
  if (!(COMMAND in redis)) redis.defineCommand(COMMAND, { lua: APPEND_LUA });
}

/**
 * Adds the append of `a` to `pipeline` (of a connection {@link defineRunLogAppend} was called
 * on before the pipeline was created). Its reply is 1, or 0 if refused.
 */
export function appendRunEvents(pipeline: ChainableCommander, a: RunLogAppend): void {
  const keys = [a.logKey, a.writerKey, ...a.deleteKeys];
  (pipeline as unknown as WithAppend)[COMMAND](keys.length, ...keys, a.token, a.channel, a.message, a.ttlS, ...a.events);
}

/**
 * Makes `token` the run's only writer: appends of any other writer are refused from now on. Done
 * by whoever ends a run it does not execute, before it reads what the run's worker emitted.
 * Returns the previous writer's token, null if none held the key (a worker sets it when it
 * claims the run, so for a running run: Redis lost it, and perhaps the run's log with it).
 */
export async function takeOverRunWriter(redis: Redis, writerKey: string, token: string, ttlS: number): Promise<string | null> {
  return redis.set(writerKey, token, "EX", ttlS, "GET");
}

/** KEYS[1] the writer key; ARGV[1] the taker's token, ARGV[2] the writer to give it back to ("" for none), ARGV[3] its TTL. */
const GIVE_BACK_LUA = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3]) end
return 1
`;

/**
 * Undoes {@link takeOverRunWriter} by `token`, if it took effect (a take-over whose answer was
 * lost may have): the run's writer is `previous` again (none when null), so that its worker's
 * appends are accepted. Nothing changes when someone else holds the key by now.
 */
export async function giveBackRunWriter(redis: Redis, writerKey: string, token: string, previous: string | null, ttlS: number): Promise<boolean> {
  return (await redis.eval(GIVE_BACK_LUA, 1, writerKey, token, previous ?? "", ttlS)) === 1;
}
