/**
 * Answers that stay open (event streams, JSON answers waiting for their run) end when the key
 * they were authenticated with is revoked, as new requests with it are refused: within the auth
 * caches' lifetime on every instance. One check per key, however many answers it has open.
 */

/** Checks a key again through its cache; what the auth middleware that accepted it put on the request. */
export interface KeyChecker {
  /** False once the key `id` is revoked or gone. May reject (the database out of reach). */
  stillValid(id: string): Promise<boolean>;
}

export interface Credential {
  /** The key as its checker knows it (an API key's hash, a widget key). */
  id: string;
  checker: KeyChecker;
}

declare module "express-serve-static-core" {
  interface Request {
    /** The key the request was authenticated with; set by the API and widget auth middlewares. */
    credential?: Credential;
  }
}

/**
 * How often the open answers' keys are checked. Each check reads the key's cache, which reloads
 * a key about twice per AUTH_CACHE_TTL_MS (≤ 1000; with 0, which caches nothing, each check is a
 * lookup), so a revocation reaches an open answer within that lifetime and this interval.
 * @defaultValue 100
 */
export const REVOCATION_CHECK_MS = 100;

interface Watched {
  credential: Credential;
  listeners: Set<() => void>;
}

export class RevocationWatch {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | null = null;
  private checking = false;

  constructor(private readonly intervalMs = REVOCATION_CHECK_MS) {}

  /**
   * Calls `onRevoked` once `credential`'s key is found revoked or gone; a check that fails (the
   * database out of reach) keeps the answer open. Returns the function that stops watching.
   */
  watch(credential: Credential, onRevoked: () => void): () => void {
    let entry = this.watched.get(credential.id);
    if (!entry) {
      entry = { credential, listeners: new Set() };
      this.watched.set(credential.id, entry);
    }
    const listener = () => onRevoked();
    entry.listeners.add(listener);
    if (!this.timer) {
      this.timer = setInterval(() => void this.check(), this.intervalMs);
      this.timer.unref();
    }
    const watched = entry;
    return () => {
      watched.listeners.delete(listener);
      if (watched.listeners.size === 0 && this.watched.get(credential.id) === watched) this.watched.delete(credential.id);
      this.stopIfIdle();
    };
  }

  /** Keys watched now (for tests and metrics). */
  get size(): number {
    return this.watched.size;
  }

  private async check(): Promise<void> {
    if (this.checking) return;
    this.checking = true;
    try {
      const entries = [...this.watched.values()];
      const valid = await Promise.all(entries.map((e) => e.credential.checker.stillValid(e.credential.id).catch(() => true)));
      entries.forEach((entry, i) => {
        if (valid[i] || this.watched.get(entry.credential.id) !== entry) return;
        this.watched.delete(entry.credential.id);
        for (const listener of entry.listeners) listener();
      });
    } finally {
      this.checking = false;
      this.stopIfIdle();
    }
  }

  private stopIfIdle(): void {
    if (this.watched.size > 0 || !this.timer) return;
    clearInterval(this.timer);
    this.timer = null;
  }
}

/** The watch of this process's open answers. */
export const revocations = new RevocationWatch();

/** Watches the key `req` was authenticated with, if any; returns the function that stops watching. */
export function onKeyRevoked(req: { credential?: Credential }, onRevoked: () => void): () => void {
  return req.credential ? revocations.watch(req.credential, onRevoked) : () => {};
}
