// Configuration for the pinned Prisma 6.19.3 CLI, which runs `migrate` and `db` commands only
// (through scripts/prisma-migrate.mjs). Prisma 7's CLI can only start its schema engine as a
// native binary that it downloads at run time; Prisma 6's experimental `engine: "js"` mode runs
// the WebAssembly schema engine in-process through adapter-pg instead, so migrations work on a
// machine without internet access. Each workaround below names the problem it avoids.
import { defineConfig } from "prisma6/config";
import { PrismaPg } from "prisma6-adapter-pg";
import pg from "pg";
import { parseIntoClientConfig } from "pg-connection-string";

// The wasm engine cannot deserialize the catalog types `name` (OID 19) and `"char"` (OID 18)
// (prisma/orm#27403); report them as text, which is what they are.
const asText = (res: any) => {
  for (const r of [res].flat()) for (const f of r?.fields ?? []) if (f.dataTypeID === 18 || f.dataTypeID === 19) f.dataTypeID = 25;
  return res;
};
class CatalogTextClient extends pg.Client {
  override query(...args: any[]): any {
    const cb = typeof args.at(-1) === "function" ? args.pop() : undefined;
    if (cb) return (super.query as any)(...args, (e: any, r: any) => cb(e, e ? r : asText(r)));
    const out = (super.query as any)(...args);
    return typeof out?.then === "function" ? out.then(asText) : out;
  }
}

// Discrete fields instead of a connection string: pg lets `connectionString` override
// `database`, which would make adapter-pg's "shadow database" the real one. They are parsed as pg
// parses a connection string, so its parameters (`sslmode`, `sslrootcert`, `options`, …) apply
// to migrations as they do to the services.
const cfg: pg.PoolConfig = {
  ...(parseIntoClientConfig(process.env.DATABASE_URL ?? "") as pg.PoolConfig),
  Client: CatalogTextClient as any,
  allowExitOnIdle: true, // an idle pool would keep the CLI alive for 10 s after it is done
};

// adapter-pg runs a migration script by splitting it on every ";", which breaks function bodies
// and comments containing semicolons; send each script whole instead (PostgreSQL's simple query
// protocol runs several statements in one call).
function wholeScripts<T extends { executeScript(script: string): Promise<void> }>(conn: T): T {
  const c = conn as any;
  c.executeScript = async (script: string) => {
    try {
      await c.client.query(script);
    } catch (error) {
      c.onError(error);
    }
  };
  return conn;
}

// adapter-pg drops the shadow database before closing its pool, which fails while the pool is
// connected; create and drop it around a dedicated adapter instead.
class MigratePg extends PrismaPg {
  override async connect() {
    return wholeScripts(await super.connect());
  }

  override async connectToShadowDb() {
    const main = await this.connect();
    const database = `prisma_migrate_shadow_db_${crypto.randomUUID()}`;
    await main.executeScript(`CREATE DATABASE "${database}"`);
    const shadow = wholeScripts(await new PrismaPg({ ...cfg, database }).connect());
    const close = shadow.dispose.bind(shadow);
    shadow.dispose = async () => {
      await close();
      await main.executeScript(`DROP DATABASE IF EXISTS "${database}"`);
      await main.dispose();
    };
    return shadow;
  }
}

// The wasm engine leaves long timers behind, which keep the CLI process alive for up to a
// minute after success; unref them so the process exits when its work is done.
const nativeSetTimeout = globalThis.setTimeout;
globalThis.setTimeout = ((fn: any, ms?: number, ...rest: any[]) => {
  const t = nativeSetTimeout(fn, ms, ...rest);
  if ((ms ?? 0) >= 10_000) t.unref();
  return t;
}) as typeof setTimeout;

export default defineConfig({
  experimental: { adapter: true },
  engine: "js",
  migrations: { path: "./migrations" }, // relative to this file
  adapter: async () => new MigratePg(cfg),
});
