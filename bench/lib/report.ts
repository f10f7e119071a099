import fs from "node:fs";
import path from "node:path";

/** One measured figure, with the baseline it is compared to and the target it is judged by. */
export interface Metric {
  name: string;
  unit: string;
  value: number | null;
  /** The same figure measured on the baseline (the scripted model directly, or /healthz). */
  baseline?: number | null;
  /** value / baseline. */
  ratio?: number | null;
  /** Human-readable target, e.g. "≤ 5". */
  target?: string;
  /** true PASS, false MISS, undefined: informational. */
  pass?: boolean;
  /**
   * The baseline, a bound of the figure (see {@link judged}), misses the target itself: the
   * machine, not only the service, is too slow for it.
   */
  baselineMisses?: boolean;
  note?: string;
}

export interface ScenarioResult {
  name: string;
  description: string;
  metrics: Metric[];
  /** Raw figures (distributions, counts, plans) kept in the JSON file. */
  details: Record<string, unknown>;
  durationS: number;
  /** Set when the scenario could not run to the end. */
  error?: string;
}

const fmt = (v: number | null | undefined) => {
  if (v === null || v === undefined || Number.isNaN(v)) return "–";
  if (Number.isInteger(v)) return String(v);
  const a = Math.abs(v);
  return a >= 1000 ? Math.round(v).toString() : a >= 100 ? v.toFixed(0) : a >= 10 ? v.toFixed(1) : v.toFixed(2);
};

/**
 * A metric judged against `target`: ≤ limit (or ≥ limit when `atLeast`). With `baselineBound`
 * (the baseline is the same measure of a path the figure cannot beat: `GET /healthz` for an API
 * latency, the scripted model alone for runs/s), a baseline that misses the target is marked.
 */
export function judged(m: Omit<Metric, "ratio" | "pass" | "target" | "baselineMisses">, limit: number, atLeast = false, { baselineBound = false } = {}): Metric {
  const ratio = m.baseline && m.value !== null ? m.value / m.baseline : null;
  const meets = (v: number) => (atLeast ? v >= limit : v <= limit);
  const pass = m.value === null ? false : meets(m.value);
  const baselineMisses = baselineBound && typeof m.baseline === "number" && !meets(m.baseline) ? { baselineMisses: true } : {};
  return { ...m, ratio, target: `${atLeast ? "≥" : "≤"} ${limit}`, pass, ...baselineMisses };
}

/** An informational metric (no target), with its ratio to the baseline when there is one. */
export function info(m: Omit<Metric, "ratio" | "pass" | "target">): Metric {
  return { ...m, ratio: m.baseline && m.value !== null ? m.value / m.baseline : null };
}

export function printTable(results: ScenarioResult[], out: (s: string) => void = (s) => process.stdout.write(`${s}\n`)): void {
  const rows: string[][] = [["scenario", "metric", "measured", "baseline", "ratio", "target", "result"]];
  for (const r of results) {
    if (r.error) rows.push([r.name, `ERROR: ${r.error.split("\n")[0]!.slice(0, 90)}`, "", "", "", "", "MISS"]);
    for (const m of r.metrics) {
      const result = m.pass === undefined ? "" : m.pass ? "PASS" : m.baselineMisses ? "MISS (baseline too)" : "MISS";
      rows.push([r.name, m.name, `${fmt(m.value)} ${m.unit}`.trim(), m.baseline === undefined ? "" : fmt(m.baseline), m.ratio ? `${fmt(m.ratio)}×` : "", m.target ? (/^[≤≥]/.test(m.target) ? `${m.target} ${m.unit}`.trim() : m.target) : "", result]);
    }
  }
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((row) => row[i]!.length)));
  const line = (row: string[]) => row.map((c, i) => (i >= 2 && i <= 4 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join("  ");
  out(line(rows[0]!));
  out(widths.map((w) => "-".repeat(w)).join("  "));
  let last = "";
  for (const row of rows.slice(1)) {
    out(line(row[0] === last ? ["", ...row.slice(1)] : row));
    last = row[0]!;
  }
  for (const r of results) for (const m of r.metrics) if (m.note) out(`  ${r.name} / ${m.name}: ${m.note}`);
  const slowMachine = results.flatMap((r) => r.metrics.filter((m) => m.baselineMisses).map((m) => `${r.name} / ${m.name}`));
  if (slowMachine.length)
    out(`  the baseline alone misses the target (the machine is too slow for it, whatever the service does): ${slowMachine.join("; ")}`);
}

/** Writes bench/results/<iso-timestamp>.json and returns its path. */
export function writeResults(dir: string, startedAt: Date, payload: object): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${startedAt.toISOString().replaceAll(":", "-")}.json`);
  fs.writeFileSync(file, `${JSON.stringify(payload, null, 2)}\n`);
  return file;
}
