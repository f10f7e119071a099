/**
 * Bounds how many `text_chunk` events one run emits. A model endpoint may stream its text a
 * character per chunk, without pause, for as long as an answer may be (16 million characters):
 * one event each would fill the run's Redis log, its stored batches and every reader's replay
 * with tens of millions of events. A run's first {@link UNPACED_TEXT_CHUNKS} pieces of text are
 * each an event, as the model sent them; after that, text goes out at most once per
 * {@link TEXT_PACE_MS}: a piece that comes after a quiet spell leaves at once, one that follows
 * another within the interval waits for the interval's end with whatever else came meanwhile
 * (up to {@link MAX_PACED_CHUNK_CHARS}, which leave at once). Nothing is dropped or reordered:
 * the caller calls {@link TextPacer.flush} before it emits any other event.
 */

/** Pieces of text of one run sent as events of their own, one per piece the model sent. */
export const UNPACED_TEXT_CHUNKS = 1000;

/** The shortest time between two `text_chunk` events of a run past {@link UNPACED_TEXT_CHUNKS}. */
export const TEXT_PACE_MS = 50;

/** Text held back that leaves at once, without waiting for the interval's end. */
export const MAX_PACED_CHUNK_CHARS = 64 * 1024;

export class TextPacer {
  private emitted = 0;
  private pending = "";
  private lastEmitAt = -Infinity;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly emit: (content: string) => void,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The number of `text_chunk` events emitted so far. */
  get chunks(): number {
    return this.emitted;
  }

  /** Takes the model's next piece of text: emitted now, or with the next paced event. */
  push(content: string): void {
    if (content === "") return;
    if (this.emitted < UNPACED_TEXT_CHUNKS && this.pending === "") return this.send(content);
    this.pending += content;
    const wait = this.lastEmitAt + TEXT_PACE_MS - this.now();
    if (wait <= 0 || this.pending.length >= MAX_PACED_CHUNK_CHARS) return this.flush();
    this.timer ??= setTimeout(() => {
      this.timer = null;
      this.flush();
    }, Math.ceil(wait));
  }

  /** Emits the text held back, if any: before any other event of the run, and when its model call ends. */
  flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    if (this.pending === "") return;
    const content = this.pending;
    this.pending = "";
    this.send(content);
  }

  private send(content: string): void {
    this.emitted++;
    this.lastEmitAt = this.now();
    this.emit(content);
  }
}
