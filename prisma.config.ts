// Prisma 7 CLI configuration, used for `prisma generate` only. Migrations go through
// scripts/prisma-migrate.mjs (see the comment there): Prisma 7's CLI needs a native schema
// engine that cannot be downloaded on an offline machine.
import { defineConfig } from "prisma/config";

export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/agentrun" },
});
