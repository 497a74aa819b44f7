// A device's subscription to its inbox (docs/inboxes.md, "Subscribing from a device"): one WebSocket
// per subscription, opened with the client's device token, that replays every entry after the device's
// cursor and then delivers new ones. The handler runs once per entry, in order; the entry is acked after
// it returns and the cursor kept where the application says. After a drop the subscription connects
// again from its cursor and epoch; entries at or below the cursor (the seam of a reconnect) are skipped,
// so a handler sees each sequence once.
import { clientErrorCodes, HopperError } from "./errors.js";
import { type ServerFrame, SocketSession, type SocketTarget } from "./socket.js";

/**
 * Frames kept while a subscribe's answer is on its way: the server sends at most a few (entries and
 * live) before the client reads the answer; beyond this, they are dropped and replayed on reconnect.
 */
const earlyFramesMax = 64;

/** An inbox entry as the server sends it. */
export interface InboxEntry {
  seq: number;
  id: string;
  contentType: string;
  headers: Record<string, string>;
  /** A JSON body; absent when the body is bytes (`bodyBase64`). */
  body?: unknown;
  bodyBase64?: string;
  appendedAt: string;
}

/** Where a device stands: the highest sequence it processed, in the epoch of the namespace it was read in. */
export interface InboxCursor {
  seq: number;
  epoch: string | undefined;
}

/** Where the cursor is kept between runs: memory (default), `localStorage`, or the application's own. */
export interface InboxCursorStore {
  load(): InboxCursor | undefined | Promise<InboxCursor | undefined>;
  save(cursor: InboxCursor): void | Promise<void>;
}

/** The server could not continue from the cursor without a hole: resync from the application's history. */
export interface InboxGap {
  oldest: number;
  head: number;
  epoch: string;
}

export interface InboxSubscribeOptions {
  ns: string;
  device: string;
  /** The cursor to start from when the store has none (default 0: from the oldest entry retained). */
  after?: number;
  /** The epoch of `after`; required when `after` is above 0. */
  epoch?: string;
  /** Whose inbox: a device token's own (leave it out); a service with an API key names it. */
  recipient?: string;
  /** Runs once per entry, in order; the entry is acked when it returns. A throw stops the subscription. */
  onEntry: (entry: InboxEntry) => void | Promise<void>;
  /** Entries were lost before `oldest` (trimmed, another epoch, skipped): resync from history. */
  onGap?: (gap: InboxGap) => void | Promise<void>;
  /** Connection failures and handler errors. Default: console.error. */
  onError?: (error: unknown) => void;
  /** Where the cursor is kept (default: in memory); see `localStorageCursor`. */
  cursorStore?: InboxCursorStore;
}

export interface InboxSubscription {
  /** The device's cursor now. */
  readonly cursor: InboxCursor;
  /** Resolves once the first connection has subscribed. */
  readonly ready: Promise<void>;
  /** Stops the subscription and closes its connection. */
  close(): Promise<void>;
}

/** A cursor kept in memory: the subscription starts from `after`/`epoch` on each run of the program. */
export function memoryCursor(initial?: InboxCursor): InboxCursorStore {
  let cursor = initial;
  return {
    load: () => cursor,
    save: (next) => {
      cursor = next;
    },
  };
}

/** A cursor kept in the browser's `localStorage` under `key`, so a reload resumes where it was. */
export function localStorageCursor(key: string): InboxCursorStore {
  const storage = (globalThis as { localStorage?: Storage }).localStorage;
  if (!storage) throw new Error("localStorageCursor: this runtime has no localStorage");
  return {
    load: () => {
      const text = storage.getItem(key);
      return text === null ? undefined : (JSON.parse(text) as InboxCursor);
    },
    save: (cursor) => storage.setItem(key, JSON.stringify(cursor)),
  };
}

/** `client.inboxes`: subscribe a device to its inbox. */
export class Inboxes {
  /** The subscriptions open now: the client's close() closes them, so none reconnects after it. */
  private readonly open = new Set<InboxSubscription>();

  constructor(private readonly target: SocketTarget) {}

  async subscribe(options: InboxSubscribeOptions): Promise<InboxSubscription> {
    const store = options.cursorStore ?? memoryCursor();
    const stored = await store.load();
    const subscription = new DeviceSubscription(
      this.target,
      options,
      store,
      stored ?? { seq: options.after ?? 0, epoch: options.epoch },
      () => this.open.delete(subscription),
    );
    this.open.add(subscription);
    return subscription;
  }

  /** Closes every subscription still open. */
  async close(): Promise<void> {
    await Promise.all([...this.open].map((subscription) => subscription.close()));
  }
}

class DeviceSubscription implements InboxSubscription {
  readonly ready: Promise<void>;
  private current: InboxCursor;
  private readonly session: SocketSession;
  private sub: string | undefined;
  /** Frames that came before the subscribe's answer was read (ws may hand several over in one turn). */
  private early: ServerFrame[] = [];
  /** Entries are handled one after another, in the order they came. */
  private handling: Promise<void> = Promise.resolve();
  private markReady!: () => void;
  private closed = false;

  constructor(
    target: SocketTarget,
    private readonly options: InboxSubscribeOptions,
    private readonly store: InboxCursorStore,
    start: InboxCursor,
    /** Told once the subscription closes (the client's list of open subscriptions). */
    private readonly closedHook: () => void = () => {},
  ) {
    this.current = start;
    this.ready = new Promise((resolve) => {
      this.markReady = resolve;
    });
    this.session = new SocketSession(target, {
      onOpen: (session) => this.subscribeOn(session),
      onPush: (frame) => this.onPush(frame),
      onClose: () => {
        this.sub = undefined;
        this.early = [];
      },
      onError: (error) => this.reportError(error),
    });
  }

  get cursor(): InboxCursor {
    return { ...this.current };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.closedHook();
    await this.session.close();
    await this.handling;
  }

  /** On each connection: subscribe from the cursor as it stands once the entries before are handled. */
  private async subscribeOn(session: SocketSession): Promise<void> {
    await this.handling;
    const { ns, device, recipient } = this.options;
    const { seq, epoch } = this.current;
    const frame = {
      op: "inbox.subscribe",
      ns,
      device,
      after: seq,
      ...(seq > 0 && epoch !== undefined && { epoch }),
      ...(recipient !== undefined && { recipient }),
    };
    const answer = await session.request(frame);
    this.sub = String(answer.sub);
    if (typeof answer.epoch === "string" && this.current.epoch === undefined) {
      this.current = { ...this.current, epoch: answer.epoch };
    }
    const early = this.early;
    this.early = [];
    for (const frame of early) this.onPush(frame);
    this.markReady();
  }

  private onPush(frame: ServerFrame): void {
    if (this.sub === undefined) {
      if (this.early.length < earlyFramesMax) this.early.push(frame);
      return;
    }
    if (frame.sub !== this.sub) return;
    const sub = this.sub;
    if (frame.op === "inbox.gap") {
      const gap = { oldest: Number(frame.oldest), head: Number(frame.head), epoch: String(frame.epoch) };
      this.enqueue(async () => {
        await this.options.onGap?.(gap);
        await this.moveCursor({ seq: Math.max(0, gap.oldest - 1), epoch: gap.epoch });
      });
    } else if (frame.op === "inbox.entry") {
      const entries = frame.entries as InboxEntry[];
      this.enqueue(() => this.handle(sub, entries));
    } else if (frame.op === "inbox.unsubscribed") {
      this.reportError(errorOf(frame));
      this.session.reconnect();
    }
  }

  /** Runs the handler on each entry past the cursor, in order, then acks the last one handled. */
  private async handle(sub: string, entries: InboxEntry[]): Promise<void> {
    let last: number | undefined;
    for (const entry of entries) {
      if (this.closed) break;
      // At or below the cursor: seen before a reconnect, or replayed at its seam.
      if (entry.seq <= this.current.seq) continue;
      await this.options.onEntry(entry);
      await this.moveCursor({ seq: entry.seq, epoch: this.current.epoch });
      last = entry.seq;
    }
    if (last === undefined || this.sub !== sub) return;
    // The ack's answer is not waited for: the next entries are handled meanwhile, one ack round trip
    // each would cap a device at a frame per round trip. Acks only move the cursor forward, so their
    // answers may come in any order. A connection that dropped meanwhile acks with the next
    // subscription (its cursor is kept here).
    this.session.request({ op: "inbox.ack", sub, seq: last }).catch((error: unknown) => {
      if (!(error instanceof HopperError && error.code === clientErrorCodes.network)) this.reportError(error);
    });
  }

  private async moveCursor(cursor: InboxCursor): Promise<void> {
    this.current = cursor;
    await this.store.save(cursor);
  }

  /** Chains work after the entries before it; a failure is reported and ends the subscription. */
  private enqueue(work: () => Promise<void>): void {
    this.handling = this.handling.then(work).catch((error) => {
      this.reportError(error);
      void this.close();
    });
  }

  private reportError(error: unknown): void {
    if (this.options.onError) this.options.onError(error);
    else console.error("hopper inbox subscription:", error);
  }
}

function errorOf(frame: ServerFrame): HopperError {
  const body = frame.error as { code?: string; message?: string } | undefined;
  return new HopperError({
    code: body?.code ?? clientErrorCodes.invalidResponse,
    message: body?.message ?? "the server ended the subscription",
    status: 0,
  });
}
