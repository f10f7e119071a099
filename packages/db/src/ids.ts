import { v7 as uuidv7 } from "uuid";

export type IdPrefix = "org" | "agt" | "task" | "run" | "msg" | "mem" | "key" | "wk" | "led" | "vis";

/**
 * A new opaque id: a readable prefix and a UUIDv7 without dashes. UUIDv7 starts with the
 * creation time, so ids of one kind sort in creation order.
 */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${uuidv7().replaceAll("-", "")}`;
}
