/**
 * One WebSocket connection: reads frames, makes one broker call per frame and answers, pushes
 * deliveries and signals. It owns the push consumers and signal subscriptions made on it, and ends
 * them all when the socket closes, so every lease it held is handed back at once.
 */

import type { RawData, WebSocket } from "ws";
import type { DeviceClaims, DeviceTokens } from "../../auth/device-tokens.js";
import { PushConsumer } from "../../broker/push-consumer.js";
import { checkNackOptions, type ItemResult, type QueueBroker } from "../../broker/queues.js";
import type { Signal, SignalHub } from "../../broker/signals.js";
import type { StreamBroker } from "../../broker/streams.js";
import type { Clock } from "../../clock.js";
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import { decodeMessages } from "../wire/messages.js";
import { leasedListJson, renderItemResult } from "../wire/render.js";
import { DeviceAccess, tokenExpiredCloseCode } from "./device-access.js";
import {
  type AckFrame,
  type CancelFrame,
  type ClientFrame,
  type ConsumeFrame,
  type DrainFrame,
  type NackFrame,
  nackOptionsOf,
  parseFrame,
  type Ref,
  type SendFrame,
  type SignalPublishFrame,
} from "./frames.js";
import { ConnectionInboxes, type WsInboxes } from "./inbox-handler.js";
import { ConnectionStreams } from "./stream-handler.js";

/** The smallest WebSocket frame header (RFC 6455): what an empty frame costs the read budget. A fact of
 * the protocol, not a bound of Hopper's, so it stays here rather than in limits.ts. */
const frameHeaderBytesMin = 2;

export interface Logger {
  warn(obj: object, msg?: string): void;
  error(obj: object, msg?: string): void;
}

export interface ConnectionContext {
  broker: QueueBroker;
  signals: SignalHub;
  clock: Clock;
  log: Logger;
  /** The inbox broker's part that inbox frames use; without it they answer not_implemented. */
  inboxes?: WsInboxes | undefined;
  /** The stream broker that stream frames use; without it they answer not_implemented. */
  streams?: StreamBroker | undefined;
  /** Set on a connection opened with a device token (`?token=`): what the token allows, and how to
   * verify the tokens that refresh it. Without it the connection is a service's. */
  device?: { claims: DeviceClaims; tokens: DeviceTokens } | undefined;
}

type Answer = { op: string } & Record<string, unknown>;

export class WsConnection {
  /** Resolves once the connection is closed and every lease it held is handed back. */
  readonly closed: Promise<void>;
  private readonly consumers = new Map<string, PushConsumer>();
  private readonly subscriptions = new Map<string, () => void>();
  private readonly inboxes: ConnectionInboxes;
  private readonly streams: ConnectionStreams;
  /** What a device token allows; undefined on a service's connection. */
  private readonly deviceAccess: DeviceAccess | undefined;
  private resolveClosed!: () => void;
  private closing = false;
  private nextSub = 1;
  private operationsInFlight = 0;
  /** Too many frames are being worked on: reading waits until half of them are answered. */
  private tooManyInFlight = false;
  /** Bytes of frames read in this turn, and whether they used up the turn's budget. */
  private bytesThisTurn = 0;
  private budgetSpent = false;
  /** Whether the socket is being read: neither of the two reasons above holds (updateReading). */
  private reading = true;
  /** Whether writes of this turn are being held for one system call (corkUntilTurnEnds). */
  private corked = false;
  private sendPaused = false;
  private pongSeen = true;
  private cancelPing: () => void;
  /** The ack frames read in this turn of the event loop, settled together when it ends. */
  private acksOfTurn: { frame: AckFrame; answered: (answer: Promise<Answer>) => void }[] = [];

  constructor(
    private readonly socket: WebSocket,
    private readonly context: ConnectionContext,
  ) {
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    socket.on("message", (data, isBinary) => this.onFrame(data, isBinary));
    socket.on("pong", () => {
      this.pongSeen = true;
    });
    socket.on("close", () => void this.close());
    this.cancelPing = this.schedulePing();
    this.inboxes = new ConnectionInboxes({
      inboxes: context.inboxes,
      clock: context.clock,
      nextSub: () => String(this.nextSub++),
      send: (answer) => this.send(answer),
      sendText: (text) => this.sendText(text),
      sendPaused: () => this.sendPaused,
      onWarning: (error, sub) => this.context.log.warn({ err: error, sub }, "inbox subscription"),
    });
    this.streams = new ConnectionStreams({
      streams: context.streams,
      nextSub: () => String(this.nextSub++),
      sendText: (text) => this.sendText(text),
      onWarning: (error, sub) => this.context.log.warn({ err: error, sub }, "stream consumer"),
    });
    const { device } = context;
    this.deviceAccess =
      device &&
      new DeviceAccess(device.claims, device.tokens, context.clock, () => {
        this.socket.close(tokenExpiredCloseCode, "the device token has expired");
        void this.close();
      });
  }

  /** Unacked deliveries held by this connection's consumers, for tests. */
  get unacked(): number {
    let count = 0;
    for (const consumer of this.consumers.values()) count += consumer.unacked;
    return count;
  }

  /**
   * Ends the connection's consumers (handing back their leases) and subscriptions. Called when the
   * socket closes, and at shutdown. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closing) return this.closed;
    this.closing = true;
    this.cancelPing();
    this.deviceAccess?.close();
    for (const unsubscribe of this.subscriptions.values()) unsubscribe();
    this.subscriptions.clear();
    const consumers = [...this.consumers.values()];
    this.consumers.clear();
    await Promise.all([
      ...consumers.map((consumer) => consumer.cancel()),
      this.inboxes.close(),
      this.streams.close(),
    ]);
    this.resolveClosed();
    return this.closed;
  }

  private onFrame(data: RawData, isBinary: boolean): void {
    if (this.closing) return;
    this.operationsInFlight++;
    if (this.operationsInFlight >= limits.wsOperationsInFlightMax) this.tooManyInFlight = true;
    if (this.bytesThisTurn === 0) setImmediate(() => this.nextTurn());
    // A frame counts its header too, so that even empty frames use up the budget.
    this.bytesThisTurn += frameHeaderBytesMin + rawLength(data);
    if (this.bytesThisTurn >= limits.wsReadBytesPerTurnMax) this.budgetSpent = true;
    this.updateReading();
    void this.answer(data, isBinary).finally(() => {
      this.operationsInFlight--;
      if (this.operationsInFlight < limits.wsOperationsInFlightMax / 2) this.tooManyInFlight = false;
      this.updateReading();
    });
  }

  /** A new turn: the read budget starts over. */
  private nextTurn(): void {
    this.bytesThisTurn = 0;
    this.budgetSpent = false;
    this.updateReading();
  }

  /** Pauses or resumes the socket as the two reasons to stop reading say. Also while closing: the
   * peer's close frame must still be read. */
  private updateReading(): void {
    const read = !this.tooManyInFlight && !this.budgetSpent;
    if (read === this.reading) return;
    this.reading = read;
    if (read) this.socket.resume();
    else this.socket.pause();
  }

  /** Runs one frame and sends its answer, or an error frame that echoes its ref. */
  private async answer(data: RawData, isBinary: boolean): Promise<void> {
    let ref: Ref | undefined;
    try {
      if (isBinary) throw new HopperError("invalid_request", "Frames are JSON text, not binary.");
      const bytes = rawBytes(data);
      const parsed = parseFrame(bytes.toString("utf8"));
      if ("error" in parsed) {
        ref = parsed.ref;
        throw parsed.error;
      }
      ref = parsed.frame.ref;
      // A frame answered without waiting is answered before the next frame runs, so answers to such
      // frames (subscribe, then publish) come in the order the frames came.
      const running = this.run(parsed.frame, bytes);
      const answer = running instanceof Promise ? await running : running;
      if (answer) this.send(ref === undefined ? answer : { ...answer, ref });
    } catch (error) {
      let hopperError: HopperError;
      if (error instanceof HopperError) hopperError = error;
      else {
        this.context.log.error({ err: error }, "websocket frame failed");
        hopperError = new HopperError("internal");
      }
      this.send({ op: "error", ...(ref !== undefined && { ref }), error: hopperError.toJSON() });
    }
  }

  /** Runs a checked frame (`bytes`, as it came); answers undefined when its answer is already sent. */
  private run(frame: ClientFrame, bytes: Buffer): Promise<Answer | undefined> | Answer {
    this.deviceAccess?.authorize(frame);
    switch (frame.op) {
      case "consume":
        return this.consume(frame);
      case "ack":
        return this.ackWithTurn(frame);
      case "nack": {
        const options = nackOptionsOf(frame);
        // Refused whole, as over HTTP, even when no consumer here holds its receipts.
        checkNackOptions(options);
        return this.settle(frame, (consumer, receipts) => consumer.nack(receipts, options));
      }
      case "cancel":
        return this.cancel(frame);
      case "drain":
        return this.drain(frame);
      case "send":
        return this.sendMessages(frame, bytes);
      case "signal.subscribe":
        return this.subscribe(frame.channel);
      case "signal.unsubscribe":
        this.subscriptions.get(frame.channel)?.();
        this.subscriptions.delete(frame.channel);
        return { op: "signal.unsubscribed", channel: frame.channel };
      case "signal.publish":
        return this.publish(frame);
      case "inbox.subscribe":
        return this.inboxes.subscribe(frame, this.deviceAccess?.claims);
      case "inbox.ack":
        return this.inboxes.ack(frame);
      case "inbox.unsubscribe":
        return this.inboxes.unsubscribe(frame);
      case "stream.consume":
        return this.streams.consume(frame);
      case "stream.commit":
        return this.streams.commit(frame);
      case "stream.cancel":
        return this.streams.cancel(frame);
      case "share.consume":
        return this.streams.consumeShare(frame);
      case "share.ack":
      case "share.nack":
        return this.streams.settle(frame);
      case "auth.refresh":
        if (!this.deviceAccess) {
          throw new HopperError(
            "invalid_request",
            "Only a connection opened with a device token is refreshed.",
          );
        }
        return this.deviceAccess.refresh(frame.token);
    }
  }

  /**
   * A send over the socket: the same broker call, refusals and per-item results as the HTTP send. JSON
   * bodies are stored as the bytes the frame carried them in.
   */
  private async sendMessages(frame: SendFrame, bytes: Buffer): Promise<Answer> {
    const messages = decodeMessages(frame.messages, bytes);
    const results = await this.context.broker.send(frame.queue, messages);
    return { op: "sent", results: results.map(renderItemResult) };
  }

  private async consume(frame: ConsumeFrame): Promise<undefined> {
    if (this.consumers.size >= limits.wsConsumersPerConnectionMax) {
      throw new HopperError("too_many_consumers", undefined, { max: limits.wsConsumersPerConnectionMax });
    }
    // A missing queue is refused here, with the frame's ref, rather than by a consumer that then ends.
    await this.context.broker.getQueue(frame.queue);
    if (this.closing) throw new HopperError("invalid_request", "The connection is closing.");
    const sub = String(this.nextSub++);
    const consumer = new PushConsumer({
      broker: this.context.broker,
      clock: this.context.clock,
      queue: frame.queue,
      prefetch: frame.prefetch,
      // A consumer that asked for batches gets each lease's messages in one frame; otherwise one frame per
      // message, as API.md has it. Either way the frame is written directly (leasedListJson).
      deliver: (messages) => {
        if (frame.batch) {
          this.sendText(leasedListJson(`{"op":"deliver","sub":"${sub}","messages":[`, messages, "]}"));
        } else {
          for (const message of messages)
            this.sendText(leasedListJson(`{"op":"deliver","sub":"${sub}","message":`, [message], "}"));
        }
      },
      onEnd: (error) => {
        this.consumers.delete(sub);
        this.send({ op: "cancelled", sub, error: error.toJSON() });
      },
      onWarning: (error) => this.context.log.warn({ err: error, queue: frame.queue, sub }, "push consumer"),
    });
    this.consumers.set(sub, consumer);
    if (this.sendPaused) consumer.pause();
    // The answer goes out before the first delivery: start() may deliver at once.
    this.send(frame.ref === undefined ? { op: "consuming", sub } : { op: "consuming", sub, ref: frame.ref });
    consumer.start();
    return undefined;
  }

  /**
   * An ack frame waits for the end of the turn, and the acks of every frame read in it go to the
   * broker together, up to a batch per call: a client that acks each message in a frame of its own
   * (API.md's protocol, as most clients speak it) then costs one store call per turn, not per message.
   * Each frame is still answered with its own results, in its own order.
   */
  private ackWithTurn(frame: AckFrame): Promise<Answer> {
    if (this.acksOfTurn.length === 0) setImmediate(() => this.settleAcksOfTurn());
    return new Promise((answered) => this.acksOfTurn.push({ frame, answered }));
  }

  private settleAcksOfTurn(): void {
    const frames = this.acksOfTurn;
    this.acksOfTurn = [];
    const settled = this.settleReceipts(
      frames.flatMap(({ frame }) => frame.receipts),
      (consumer, receipts) => consumer.ack(receipts),
    );
    for (const { frame, answered } of frames) {
      answered(
        settled.then((resultOf) => ({
          op: "acked",
          results: frame.receipts.map((receipt) => resultOf(receipt)),
        })),
      );
    }
  }

  /** Nacks a frame's receipts, answered with their results in the order given. */
  private async settle(
    frame: NackFrame,
    call: (consumer: PushConsumer, receipts: string[]) => Promise<ItemResult[]>,
  ): Promise<Answer> {
    const resultOf = await this.settleReceipts(frame.receipts, call);
    return { op: "nacked", results: frame.receipts.map((receipt) => resultOf(receipt)) };
  }

  /**
   * Acks or nacks receipts, each through the consumer that delivered it on this connection, a batch
   * (batchSizeMax) per broker call; a receipt no consumer here holds answers `stale_receipt`. Answers
   * each receipt's rendered result.
   */
  private async settleReceipts(
    receipts: readonly string[],
    call: (consumer: PushConsumer, receipts: string[]) => Promise<ItemResult[]>,
  ): Promise<(receipt: string) => object> {
    const byConsumer = new Map<PushConsumer, string[]>();
    const placed = new Set<string>();
    for (const receipt of receipts) {
      if (placed.has(receipt)) continue;
      for (const consumer of this.consumers.values()) {
        if (!consumer.holds(receipt)) continue;
        const held = byConsumer.get(consumer) ?? [];
        held.push(receipt);
        byConsumer.set(consumer, held);
        placed.add(receipt);
        break;
      }
    }
    const resultByReceipt = new Map<string, ItemResult>();
    const calls: Promise<void>[] = [];
    for (const [consumer, held] of byConsumer) {
      for (let start = 0; start < held.length; start += limits.batchSizeMax) {
        const batch = held.slice(start, start + limits.batchSizeMax);
        calls.push(
          call(consumer, batch).then((results) => {
            batch.forEach((receipt, index) => {
              resultByReceipt.set(receipt, results[index] as ItemResult);
            });
          }),
        );
      }
    }
    await Promise.all(calls);
    return (receipt) => renderResult(resultByReceipt.get(receipt) ?? notHeld());
  }

  private async cancel(frame: CancelFrame): Promise<Answer> {
    const consumer = this.consumerOf(frame.sub);
    // Gone from the map first: an ack that comes while the leases are handed back finds none here.
    this.consumers.delete(frame.sub);
    await consumer.cancel();
    return { op: "cancelled", sub: frame.sub };
  }

  /**
   * The consumer is given no more messages; what it holds stays held, to be acked or nacked. Every
   * delivery it gets is sent before this answer, except those leased while the socket was backed up.
   */
  private async drain(frame: DrainFrame): Promise<Answer> {
    await this.consumerOf(frame.sub).stopLeasing();
    return { op: "draining", sub: frame.sub };
  }

  private consumerOf(sub: string): PushConsumer {
    const consumer = this.consumers.get(sub);
    if (!consumer) {
      throw new HopperError("consumer_not_found", `This connection has no consumer "${sub}".`, { sub });
    }
    return consumer;
  }

  private subscribe(channel: string): Answer {
    if (!this.subscriptions.has(channel)) {
      if (this.subscriptions.size >= limits.signalSubscriptionsPerConnectionMax) {
        throw new HopperError(
          "too_many_subscriptions",
          `A connection holds at most ${limits.signalSubscriptionsPerConnectionMax} signal subscriptions.`,
          { max: limits.signalSubscriptionsPerConnectionMax },
        );
      }
      this.subscriptions.set(
        channel,
        this.context.signals.subscribe(channel, (signal) => this.pushSignal(signal)),
      );
    }
    return { op: "signal.subscribed", channel };
  }

  private publish(frame: SignalPublishFrame): Answer {
    const delivered = this.context.signals.publish(frame.channel, frame.data);
    return { op: "signal.published", channel: frame.channel, delivered };
  }

  /** Sends a signal unless the socket is backed up: signals are ephemeral, so a late one is dropped. */
  private pushSignal(signal: Signal): boolean {
    if (this.closing || this.socket.readyState !== this.socket.OPEN) return false;
    if (this.socket.bufferedAmount > limits.wsSendBufferBytesHigh) return false;
    const frame = `{"op":"signal","channel":${JSON.stringify(signal.channel)},"data":${signal.dataJson}}`;
    this.sendText(frame);
    return true;
  }

  private send(answer: Answer): void {
    this.sendText(JSON.stringify(answer));
  }

  /**
   * Writes a frame, and pauses every consumer once the send buffer passes the high mark. Each write's
   * callback looks at the buffer again, so the last one to flush resumes them.
   */
  private sendText(text: string | Buffer): void {
    if (this.socket.readyState !== this.socket.OPEN) return;
    this.corkUntilTurnEnds();
    // A Buffer is a text frame's UTF-8 (leasedListJson), sent as it is.
    this.socket.send(text, { binary: false }, () => this.afterWrite());
    if (!this.sendPaused && this.socket.bufferedAmount > limits.wsSendBufferBytesHigh) {
      this.sendPaused = true;
      for (const consumer of this.consumers.values()) consumer.pause();
      this.inboxes.pause();
    }
  }

  /**
   * Holds the frames written in one turn of the event loop and sends them in one system call when the
   * turn ends: a batch of deliveries is then one write, not one per message.
   */
  private corkUntilTurnEnds(): void {
    if (this.corked) return;
    // ws keeps its TCP socket as `_socket`; corking it only batches writes, it changes no frame.
    const tcp = (this.socket as unknown as { _socket?: { cork(): void; uncork(): void } })._socket;
    if (!tcp) return;
    this.corked = true;
    tcp.cork();
    process.nextTick(() => {
      this.corked = false;
      tcp.uncork();
    });
  }

  private afterWrite(): void {
    if (!this.sendPaused || this.closing || this.socket.bufferedAmount > limits.wsSendBufferBytesLow) return;
    this.sendPaused = false;
    for (const consumer of this.consumers.values()) {
      consumer.resume();
      // A consumer that refilled the buffer has paused them all again.
      if (this.sendPaused) return;
    }
    this.inboxes.resume();
  }

  /** Pings every `limits.wsPingIntervalMs`; a peer that has not answered the previous ping is cut off. */
  private schedulePing(): () => void {
    const { clock } = this.context;
    return clock.setTimer(clock.now() + limits.wsPingIntervalMs, () => {
      if (this.closing) return;
      if (!this.pongSeen) {
        this.socket.terminate();
        return;
      }
      this.pongSeen = false;
      this.socket.ping();
      this.cancelPing = this.schedulePing();
    });
  }
}

function rawLength(data: RawData): number {
  if (Array.isArray(data)) return data.reduce((bytes, part) => bytes + part.length, 0);
  return data.byteLength;
}

function rawBytes(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

function renderResult(result: ItemResult): object {
  return "error" in result ? { error: result.error.toJSON() } : result;
}

function notHeld(): ItemResult {
  return {
    error: new HopperError(
      "stale_receipt",
      "No consumer on this connection holds this receipt: it was acked, its lease ended, or it was delivered elsewhere.",
    ),
  };
}
