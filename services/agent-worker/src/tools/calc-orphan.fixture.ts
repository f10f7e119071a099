/**
 * Started by calc-sandbox.test.ts as a process of its own, to be killed with SIGKILL while its
 * calc process computes: prints `computing <pid of the calc process's parent>` once it asked.
 */
import { CalcSandbox } from "./calc-sandbox";

const sandbox = new CalcSandbox({ timeoutMs: 1500, maxWaitMs: 30_000, maxHeapMb: 64, threads: 1 });
const keep = setInterval(() => {}, 1000);
void (async () => {
  await sandbox.warm();
  void sandbox.evaluate("f(x) = x < 2 ? x : f(x - 1) + f(x - 2); f(60)", new AbortController().signal).catch(() => {});
  process.stdout.write(`computing ${process.pid}\n`);
  void keep;
})();
