/**
 * A receipt is "<seq>.<lease token>" in base 36: it names one lease of one message row. The token
 * is random per lease, so a receipt from an earlier lease of the same row never matches a later one.
 */
import { invariant } from "../errors.js";
import { limits } from "../limits.js";

/** A seq, at most Number.MAX_SAFE_INTEGER, takes 11 base-36 digits; a lease token (48 bits, a little
 * more with its rank added) takes 10. These are the receipt's format, not tunable bounds. */
const seqDigitsMax = 11;
const leaseTokenDigitsMax = 10;
const receiptPattern = new RegExp(`^([0-9a-z]{1,${seqDigitsMax}})\\.([0-9a-z]{1,${leaseTokenDigitsMax}})$`);
// Every receipt the server issues must pass the wire's schema, which refuses longer ones unread.
invariant(
  seqDigitsMax + 1 + leaseTokenDigitsMax <= limits.receiptLengthMax,
  "a receipt fits receiptLengthMax",
);

export function encodeReceipt(seq: number, leaseToken: number): string {
  return `${seq.toString(36)}.${leaseToken.toString(36)}`;
}

export function decodeReceipt(receipt: string): { seq: number; leaseToken: number } | undefined {
  const match = receiptPattern.exec(receipt);
  if (!match) return undefined;
  return {
    seq: Number.parseInt(match[1] as string, 36),
    leaseToken: Number.parseInt(match[2] as string, 36),
  };
}
