/**
 * The calc tool's process (see calc-sandbox.ts): evaluates one expression per message with a
 * hardened mathjs instance and answers `{id, result}` or `{id, error}`. It runs apart from the
 * worker's event loop and heap, so an expression that computes for long or allocates a lot
 * costs this process (stopped by its parent, or aborted by V8) and never the runs.
 */
import { Script } from "node:vm";
import { create, all } from "mathjs";
import { echoed } from "@agentrun/errors";
import { CALC_MAX_RESULT_CHARS } from "./calc-limits";

// Every function that could reach outside plain arithmetic, or change how later expressions
// evaluate, is disabled (import, createUnit, config, evaluate/parse recursion, symbolic
// algebra), as mathjs's security guide advises. Properties are not reached either (see
// refuseProperties): the functions of the namespace carry methods that change it for every
// later expression (`typed.clear()`, `typed.addConversion(…)`).
const math = create(all!);
const parse = math.parse.bind(math);
const disabled = () => {
  throw new Error("function disabled");
};
math.import(
  {
    import: disabled,
    createUnit: disabled,
    config: disabled,
    evaluate: disabled,
    parse: disabled,
    simplify: disabled,
    simplifyCore: disabled,
    simplifyConstant: disabled,
    rationalize: disabled,
    symbolicEqual: disabled,
    leafCount: disabled,
    derivative: disabled,
    help: disabled,
    parser: disabled,
    compile: disabled,
    resolve: disabled,
    reviver: disabled,
  },
  { override: true },
);

export interface CalcRequest {
  id: number;
  expression: string;
}
export type CalcReply =
  | { id: number; result: number | boolean | string }
  | { id: number; error: string }
  /** The answer's length, past CALC_MAX_RESULT_CHARS: the answer itself is not sent. */
  | { id: number; oversized: number }
  | { ready: true };

/**
 * Longest error message handed back. mathjs quotes the offending value in some messages, and an
 * expression of a few hundred characters can build a value of millions (a string doubled in a
 * loop): that must not become the model's tool result, the run's events and its cost.
 */
const MAX_ERROR_CHARS = 300;

type Outcome = number | boolean | string | { error: string } | { oversized: number };

interface ParsedNode {
  type: string;
  index?: { isObjectProperty(): boolean; getObjectProperty(): string } | null;
  traverse(visit: (node: ParsedNode) => void): void;
  evaluate(scope: object): unknown;
}

/**
 * Refuses reading, calling or setting a property by name (`a.b`, `a["b"]`, `a.b = 1`): what an
 * expression computes needs none, and a function's methods can change the shared namespace.
 * A name built at run time (`a[concat("b")]`) is refused by mathjs itself for functions.
 */
function refuseProperties(node: ParsedNode): void {
  node.traverse((n) => {
    if ((n.type === "AccessorNode" || n.type === "AssignmentNode") && n.index?.isObjectProperty()) {
      throw new Error(`properties (${n.index.getObjectProperty()}) cannot be used`);
    }
  });
}

/**
 * The value of `expression` as JSON can carry it, or why there is none. What mathjs throws, while
 * evaluating or formatting, is turned into the expression's error by {@link bounded}.
 */
function calculate(expression: string): Outcome {
  // A `;` hides the value of the statement it ends: a trailing one would leave no value at all.
  const node = parse(expression.replace(/[\s;]+$/, "")) as unknown as ParsedNode;
  refuseProperties(node);
  let value: unknown = node.evaluate({});
  // Statements separated by `;` or new lines: the value is the last one's (mathjs gives them all).
  if (math.isResultSet(value)) value = (value as { entries: unknown[] }).entries.at(-1);
  // JSON has no Infinity or NaN: the model would see null.
  if (typeof value === "number") return Number.isFinite(value) ? value : { error: `no finite value (${value})` };
  if (typeof value === "boolean") return value;
  if (typeof value === "string") return sized(value);
  if (value && typeof value !== "function" && typeof (value as { toString?: unknown }).toString === "function") {
    return sized(math.format(value as never, { precision: 14 }));
  }
  return { error: "does not evaluate to a value" };
}

const sized = (text: string): Outcome => (text.length > CALC_MAX_RESULT_CHARS ? { oversized: text.length } : text);

/**
 * Longest one evaluation may take here (the first argument). The parent stops a calculation far
 * sooner; this bounds one whose parent died without a word (killed with SIGKILL): the evaluation
 * is synchronous, so the process could not notice its parent's going before it ends.
 */
const EVALUATION_LIMIT_MS = Number(process.argv[2]) || 10_000;
const step = new Script("agentrunCalcStep()", { filename: "calc-step" });
const globals = globalThis as unknown as { agentrunCalcStep?: () => Outcome };

/** {@link calculate} within {@link EVALUATION_LIMIT_MS}; past it, the process ends. */
function bounded(expression: string): Outcome {
  globals.agentrunCalcStep = () => calculate(expression);
  try {
    return step.runInThisContext({ timeout: EVALUATION_LIMIT_MS }) as Outcome;
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_SCRIPT_EXECUTION_TIMEOUT") process.exit(2);
    // Anything else the expression caused, while evaluated or formatted (a value nested 20,000
    // levels deep overflows the stack there), is the expression's error, not a crash of this process.
    return { error: echoed(String((err as Error)?.message ?? err), MAX_ERROR_CHARS) };
  }
}

const reply = (message: CalcReply) => process.send?.(message);
process.on("message", ({ id, expression }: CalcRequest) => {
  const out = bounded(expression);
  reply(typeof out === "object" ? { id, ...out } : { id, result: out });
});
// Its worker gone (killed, say): nothing is left to answer.
process.on("disconnect", () => process.exit(0));
// Loaded: calculations are timed from here on, not while mathjs loads.
reply({ ready: true });
