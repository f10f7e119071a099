/** `text` cut to its first `max` characters, with an ellipsis when anything was left out. */
export const cutText = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text);
