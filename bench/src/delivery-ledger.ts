/** Which sequence numbers were delivered and how often: the exactly-once check of W1 and W3. */
import type { Delivery } from "./target.js";

export class DeliveryLedger {
  /** Sequence numbers delivered at least once. */
  distinct = 0;
  /** Deliveries of a sequence number already delivered. */
  duplicates = 0;
  /** Deliveries whose deliveryCount was above 1; undefined once a target did not say. */
  redeliveries: number | undefined = 0;
  // One count per sequence number: 0 = not delivered yet, 2 or more = delivered again.
  private readonly deliveries: Uint16Array;

  constructor(private readonly messages: number) {
    this.deliveries = new Uint16Array(messages);
  }

  /** Records one delivery; a sequence number outside the workload is a bug and throws. */
  record(message: Delivery): void {
    const { seq } = message.body;
    if (!(Number.isInteger(seq) && seq >= 0 && seq < this.messages)) {
      throw new Error(`received sequence number ${seq} out of range`);
    }
    if (message.deliveryCount === undefined) this.redeliveries = undefined;
    else if (message.deliveryCount > 1 && this.redeliveries !== undefined) this.redeliveries++;
    const count = this.deliveries[seq] as number;
    if (count > 0) this.duplicates++;
    else this.distinct++;
    this.deliveries[seq] = Math.min(count + 1, 0xffff);
  }

  /** Sequence numbers never delivered. */
  missing(): number {
    return this.messages - this.distinct;
  }

  /** Where delivery stands; once every publish is confirmed, an undelivered message is MISSING. */
  describe(published: string, allConfirmed: boolean): string {
    const state = allConfirmed ? "MISSING (confirmed, never delivered)" : "not delivered yet";
    return `${published}, ${this.distinct} delivered, ${this.missing()} ${state}, ${this.duplicates} duplicates`;
  }

  /** Fails the workload if any confirmed message was never delivered. */
  assertComplete(workload: string, describe: () => string): void {
    const missing = this.missing();
    if (missing > 0)
      throw new Error(`${workload}: ${missing} confirmed messages were never delivered: ${describe()}`);
  }
}
