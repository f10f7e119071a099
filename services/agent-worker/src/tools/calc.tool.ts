import { create, all } from "mathjs";
import { z } from "zod";
import { defineAction, ToolError } from "./tool";

// A mathjs instance with every function that could reach outside plain arithmetic disabled
// (import, createUnit, evaluate/parse recursion, symbolic algebra), as its security guide advises.
const math = create(all!);
const evaluate = math.evaluate.bind(math);
const disabled = () => {
  throw new Error("function disabled");
};
math.import(
  { import: disabled, createUnit: disabled, evaluate: disabled, parse: disabled, simplify: disabled, derivative: disabled, compile: disabled, resolve: disabled, reviver: disabled },
  { override: true },
);

export const calcEvaluate = defineAction({
  tool: "calc",
  action: "evaluate",
  description: "Evaluates an arithmetic expression, e.g. '(2 + 3) * 4 / 5' or 'sqrt(16) + 2^3'.",
  params: z.object({ expression: z.string().min(1).max(1000).describe("The expression to evaluate") }),
  async run({ expression }) {
    let value: unknown;
    try {
      value = evaluate(expression, {});
    } catch (err) {
      throw new ToolError("invalid_expression", `Cannot evaluate '${expression}': ${(err as Error).message}`);
    }
    // JSON has no Infinity or NaN: the model would see null.
    if (typeof value === "number" && !Number.isFinite(value)) throw new ToolError("invalid_expression", `'${expression}' has no finite value (${value}).`);
    if (typeof value === "number" || typeof value === "boolean") return { expression, result: value };
    if (value && typeof (value as { toString?: unknown }).toString === "function" && typeof value !== "function") {
      return { expression, result: math.format(value as never, { precision: 14 }) };
    }
    throw new ToolError("invalid_expression", `'${expression}' does not evaluate to a value.`);
  },
});
