/**
 * What queues do: the semantics of DESIGN.md §3 on top of the Store, and the one object the protocol
 * adapters call. It puts together the parts, each a file with one job: administration
 * (queue-admin.ts), sending (queue-send.ts), receiving and settling leases (queue-receive.ts), redrive
 * (queue-redrive.ts), and housekeeping with leadership (queue-housekeeping.ts), which share the
 * queues' wake-ups (wake.ts), hand-offs (handoffs.ts) and timers (scheduler.ts). It knows no protocol.
 */
import type { Clock } from "../clock.js";
import { uuidv7Generator } from "../ids.js";
import type { LeasedMessage, MessageState, StoredMessage } from "../model/message.js";
import type { QueueAttributesInput } from "../model/queue-attributes.js";
import type { Random } from "../random.js";
import type { Store } from "../store/store.js";
import { type Claim, type HandoffSink, Handoffs } from "./handoffs.js";
import { QueueAdmin, type QueueInfo, type QueueStats } from "./queue-admin.js";
import type { ItemResult, Logger, QueueContext } from "./queue-context.js";
import { QueueHousekeeping } from "./queue-housekeeping.js";
import { type NackOptions, QueueReceiver, type ReceiveOptions } from "./queue-receive.js";
import { QueueRedrive } from "./queue-redrive.js";
import { type CopiesResult, type OutgoingMessage, QueueSender, type SendResult } from "./queue-send.js";
import type { TaskInfo } from "./redrive.js";
import { Router } from "./router.js";
import { Scheduler } from "./scheduler.js";
import { Wakeups } from "./wake.js";

export type { QueueInfo, QueueStats } from "./queue-admin.js";
export { checkRoutingKey, type ItemResult, type Logger } from "./queue-context.js";
export { checkNackOptions, type NackOptions, type ReceiveOptions } from "./queue-receive.js";
export type { OutgoingMessage, SendResult } from "./queue-send.js";

export class QueueBroker {
  private readonly context: QueueContext;
  private readonly admin: QueueAdmin;
  private readonly sender: QueueSender;
  private readonly receiver: QueueReceiver;
  private readonly redriver: QueueRedrive;
  private readonly housekeeping: QueueHousekeeping;

  constructor(
    store: Store,
    clock: Clock,
    random: Random,
    log: Logger,
    /** Resolves dead-letter exchanges; shared with the exchange broker. */
    readonly router: Router = new Router(store),
  ) {
    const wake = new Wakeups<Claim>(clock);
    const scheduler = new Scheduler(clock, (queue) => this.housekeeping.run(queue));
    this.context = { store, clock, random, log, router, wake, scheduler, stopped: false };
    const handoffs = new Handoffs(wake, (queue, leaseExpiresAt) => scheduler.offer(queue, leaseExpiresAt));
    const newId = uuidv7Generator(clock);
    this.admin = new QueueAdmin(this.context, (name) => this.housekeeping.forget(name));
    this.sender = new QueueSender(this.context, this.admin, handoffs, newId);
    this.receiver = new QueueReceiver(this.context, this.admin, handoffs);
    this.redriver = new QueueRedrive(this.context, this.admin, this.sender, newId);
    this.housekeeping = new QueueHousekeeping(this.context, this.admin);
  }

  /** Loads the queues and looks at each once, so due work left from before a restart is done. */
  start(): Promise<void> {
    return this.housekeeping.start();
  }

  /** Resolves when the store answers; /readyz asks this. */
  ready(): Promise<void> {
    return this.context.store.ping();
  }

  /** Ends every long poll and timer; the store stays open for the caller to close. */
  stop(): void {
    this.context.stopped = true;
    this.redriver.stop();
    this.housekeeping.stop();
  }

  /** Messages that left with their deleted queue; the queue's own counters went with it. */
  get removedWithDeletedQueues(): number {
    return this.admin.removedWithDeletedQueues;
  }

  /** Messages whose body failed its checksum as a lease read them, since this process started. */
  get corruptFound(): number {
    return this.receiver.corruptFound;
  }

  putQueue(name: string, input: QueueAttributesInput): Promise<{ created: boolean; queue: QueueInfo }> {
    return this.admin.putQueue(name, input);
  }

  getQueue(name: string): Promise<QueueInfo> {
    return this.admin.getQueue(name);
  }

  /** Every queue in name order. */
  listQueues(): Promise<QueueInfo[]> {
    return this.admin.listQueues();
  }

  /** The queues in name order, a page per turn of the event loop (QueueAdmin.queuePages). */
  queuePages(): AsyncGenerator<QueueInfo[]> {
    return this.admin.queuePages();
  }

  deleteQueue(name: string): Promise<{ removed: number }> {
    return this.admin.deleteQueue(name);
  }

  stats(name: string): Promise<QueueStats> {
    return this.admin.stats(name);
  }

  peek(name: string, state: MessageState, limit: number): Promise<StoredMessage[]> {
    return this.admin.peek(name, state, limit);
  }

  purge(name: string): Promise<{ purged: number }> {
    return this.admin.purge(name);
  }

  /** Counts a consumer of the queue for stats (QueueAdmin.consumerOpened). */
  consumerOpened(name: string): void {
    this.admin.consumerOpened(name);
  }

  consumerClosed(name: string): void {
    this.admin.consumerClosed(name);
  }

  /** Stores the batch's valid messages in one transaction; answers once durable (QueueSender.send). */
  send(name: string, messages: OutgoingMessage[]): Promise<SendResult[]> {
    return this.sender.send(name, messages);
  }

  /** Stores a copy of each message in each of its queues, all or none per item (QueueSender.sendCopies). */
  sendCopies(items: { message: OutgoingMessage; queues: string[] }[]): Promise<CopiesResult[]> {
    return this.sender.sendCopies(items);
  }

  /**
   * Leases up to `max` messages. With a wait, it returns as soon as at least one message is leased,
   * or empty once the wait is over (or the caller went away).
   */
  async receive(name: string, options: ReceiveOptions): Promise<LeasedMessage[]> {
    return (await this.receiver.receiveLooking(name, options)).messages;
  }

  /** receive, answering also the queue's version read before the look that answered (QueueReceiver). */
  receiveLooking(
    name: string,
    options: ReceiveOptions,
  ): Promise<{ messages: LeasedMessage[]; version: number }> {
    return this.receiver.receiveLooking(name, options);
  }

  /** Adds a taker of the queue's sends besides its long polls; answers the function that removes it. */
  addHandoffSink(name: string, sink: HandoffSink): () => void {
    return this.receiver.addHandoffSink(name, sink);
  }

  /** The head of the queue's wake-up topic: see receive's drainedAtVersion. */
  queueVersion(name: string): number {
    return this.receiver.queueVersion(name);
  }

  /** Deletes the messages whose leases the receipts name; answers once that is durable. */
  ack(name: string, receipts: string[], applied?: (results: ItemResult[]) => void): Promise<ItemResult[]> {
    return this.receiver.ack(name, receipts, applied);
  }

  /**
   * Ends leases early; each message is retried after `delayMs`, or after the queue's retry policy, or
   * with `deadLetter` moved to the queue's dead-letter target at once (NackOptions).
   */
  nack(
    name: string,
    receipts: string[],
    options: NackOptions = {},
    applied?: (results: ItemResult[]) => void,
  ): Promise<ItemResult[]> {
    return this.receiver.nack(name, receipts, options, applied);
  }

  /** Heartbeat: each named lease now ends `visibilityTimeoutMs` from now. */
  extend(name: string, receipts: string[], visibilityTimeoutMs: number): Promise<ItemResult[]> {
    return this.receiver.extend(name, receipts, visibilityTimeoutMs);
  }

  /** Starts moving the queue's messages back where they came from, or to `to`, as a task. */
  redrive(name: string, options: { to?: string; max?: number; ratePerSecond?: number }): Promise<TaskInfo> {
    return this.redriver.redrive(name, options);
  }

  task(id: string): TaskInfo {
    return this.redriver.task(id);
  }

  listTasks(): TaskInfo[] {
    return this.redriver.listTasks();
  }

  cancelTask(id: string): TaskInfo {
    return this.redriver.cancelTask(id);
  }
}
