import { argumentsForModel, ToolCallDeltas, type ToolCallDelta } from "./tool-call-deltas";

// Deltas as providers stream them in `delta.tool_calls`; callModel hands each to the assembler
// (its limit and ids: model-call.test.ts).
describe("ToolCallDeltas", () => {
  const assembled = (deltas: ToolCallDelta[]) => {
    const calls = new ToolCallDeltas(64);
    for (const d of deltas) expect(calls.add(d)).toBe(true);
    return calls.calls;
  };
  const fn = (name: string | undefined, args: string) => ({ type: "function", function: { ...(name === undefined ? {} : { name }), arguments: args } });

  it("takes a name that the provider sends again in every delta once", () => {
    const deltas = [
      { index: 0, id: "a", ...fn("calc_evaluate", "") },
      { index: 0, ...fn("calc_evaluate", '{"expression":') },
      { index: 0, ...fn("calc_evaluate", '"1+1"}') },
      { index: 1, id: "b", ...fn("clock", "") },
      // The beginning of the name again is no new piece of it.
      { index: 1, ...fn("clo", "{}") },
    ];
    expect(assembled(deltas)).toEqual([
      { id: "a", name: "calc_evaluate", arguments: '{"expression":"1+1"}' },
      { id: "b", name: "clock", arguments: "{}" },
    ]);
  });

  it("takes arguments sent as a JSON object (llama.cpp's server, TGI) as their JSON text", () => {
    const deltas = [{ index: 0, id: "a", type: "function", function: { name: "clock_now", arguments: { timezone: "Europe/Paris" } } }] as unknown as ToolCallDelta[];
    expect(assembled(deltas)).toEqual([{ id: "a", name: "clock_now", arguments: '{"timezone":"Europe/Paris"}' }]);
  });

  it("still joins a name that the provider sends in pieces", () => {
    const deltas = [{ index: 0, id: "a", ...fn("calc_", "") }, { index: 0, ...fn("evaluate", "{}") }];
    expect(assembled(deltas)).toEqual([{ id: "a", name: "calc_evaluate", arguments: "{}" }]);
  });

  it("tells parallel calls apart by id when the provider sends no index", () => {
    const deltas = [
      { id: "a", ...fn("weather", '{"city":') },
      { ...fn(undefined, '"A"}') },
      { id: "b", ...fn("clock", '{"tz":"UTC"}') },
      { id: "b", ...fn(undefined, "") },
    ];
    expect(assembled(deltas)).toEqual([
      { id: "a", name: "weather", arguments: '{"city":"A"}' },
      { id: "b", name: "clock", arguments: '{"tz":"UTC"}' },
    ]);
  });

  it("starts a new call at a new id when the provider sends every call at index 0", () => {
    const deltas = [{ index: 0, id: "a", ...fn("calc", '{"expression":"2*3"}') }, { index: 0, id: "b", ...fn("clock", "{}") }];
    expect(assembled(deltas)).toEqual([
      { id: "a", name: "calc", arguments: '{"expression":"2*3"}' },
      { id: "b", name: "clock", arguments: "{}" },
    ]);
  });

  it("starts no call beyond its limit, and adds nothing then", () => {
    const calls = new ToolCallDeltas(1);
    expect(calls.add({ index: 0, id: "a", ...fn("calc", "{}") })).toBe(true);
    expect(calls.add({ index: 1, id: "b", ...fn("clock", "{}") })).toBe(false);
    // The first call can still be continued.
    expect(calls.add({ index: 0, ...fn(undefined, " ") })).toBe(true);
    expect(calls.calls).toEqual([{ id: "a", name: "calc", arguments: "{} " }]);
  });
});

describe("argumentsForModel", () => {
  it("keeps a JSON object as the model sent it, and sends {} for anything else", () => {
    expect(argumentsForModel('{ "expression": "1+1" }')).toBe('{ "expression": "1+1" }');
    for (const text of ["{oops}", "", '{"a":', "[1,2]", "null", '"text"', "42"]) expect(argumentsForModel(text)).toBe("{}");
  });
});
