import pg from "pg";
import { testEnv } from "@agentrun/testing";
import { LISTS_AGENT, LISTS_ORG, messagesTaskOf, seedLists } from "./lists-data";

// The seed of lists-1m, at a small size, in the test database.
const sizes = { tasks: 3000, messages: 40 };
let client: pg.Client;

beforeAll(async () => {
  client = new pg.Client({ connectionString: testEnv().databaseUrl });
  await client.connect();
});

afterAll(async () => {
  await client.query("DELETE FROM messages WHERE task_id IN (SELECT id FROM tasks WHERE agent_id = $1)", [LISTS_AGENT]);
  await client.query("DELETE FROM task_counts WHERE agent_id = $1", [LISTS_AGENT]);
  await client.query("SET session_replication_role = replica");
  await client.query("DELETE FROM tasks WHERE agent_id = $1", [LISTS_AGENT]);
  await client.query("SET session_replication_role = origin");
  await client.query("DELETE FROM agents WHERE id = $1", [LISTS_AGENT]);
  await client.query("DELETE FROM organizations WHERE id = $1", [LISTS_ORG]);
  await client.end();
});

/** The seeded figures as the list endpoints read them: tasks, their counters, the newest task's messages. */
async function figures() {
  const n = async (sql: string, params: unknown[]) => Number((await client.query(sql, params)).rows[0].n);
  return {
    tasks: await n("SELECT count(*) AS n FROM tasks WHERE agent_id = $1", [LISTS_AGENT]),
    counted: await n("SELECT coalesce(sum(n), 0) AS n FROM task_counts WHERE agent_id = $1", [LISTS_AGENT]),
    messages: await n("SELECT count(*) AS n FROM messages WHERE task_id = $1", [messagesTaskOf(sizes.tasks)]),
  };
}

describe("seedLists", () => {
  it("seeds once, then leaves a seeded database as it is", async () => {
    const first = await seedLists(client, sizes);
    expect(first).toMatchObject({ tasksSeeded: true, messagesSeeded: true, countsRebuilt: true });
    expect(await figures()).toEqual({ tasks: 3000, counted: 3000, messages: 40 });
    const again = await seedLists(client, sizes);
    expect(again).toMatchObject({ tasksSeeded: false, messagesSeeded: false, countsRebuilt: false });
  });

  it("repairs what a seed cut short left: counters that miss the tasks, messages that are missing", async () => {
    // What a seed interrupted after its tasks but before the rest left behind.
    await client.query("DELETE FROM task_counts WHERE agent_id = $1", [LISTS_AGENT]);
    await client.query("DELETE FROM messages WHERE task_id = $1", [messagesTaskOf(sizes.tasks)]);
    const repaired = await seedLists(client, sizes);
    expect(repaired).toMatchObject({ tasksSeeded: false, messagesSeeded: true, countsRebuilt: true });
    expect(await figures()).toEqual({ tasks: 3000, counted: 3000, messages: 40 });
  });

  it("writes nothing when it fails part way", async () => {
    await client.query("DELETE FROM task_counts WHERE agent_id = $1", [LISTS_AGENT]);
    // No tasks at all: the seed deletes the 3,000, then its insert fails (it spreads the tasks
    // over a year, dividing by their count); everything must be left as it was.
    await expect(seedLists(client, { tasks: 0, messages: 1 })).rejects.toThrow(/division by zero/);
    expect(await figures()).toEqual({ tasks: 3000, counted: 0, messages: 40 });
    expect((await seedLists(client, sizes)).countsRebuilt).toBe(true);
    expect(await figures()).toEqual({ tasks: 3000, counted: 3000, messages: 40 });
  });
});
