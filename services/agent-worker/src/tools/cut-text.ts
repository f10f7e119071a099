/**
 * `text` cut to its first `max` UTF-16 units (one fewer rather than split a surrogate pair,
 * which strict providers and JSON parsers refuse), with an ellipsis when anything was left out.
 */
export const cutText = (text: string, max: number) => {
  if (text.length <= max) return text;
  const end = /[\ud800-\udbff]/.test(text[max - 1]!) ? max - 1 : max;
  return `${text.slice(0, end)}…`;
};
