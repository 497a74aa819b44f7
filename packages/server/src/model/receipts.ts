/**
 * A receipt is "<seq>.<lease token>" in base 36: it names one lease of one message row. The token
 * is random per lease, so a receipt from an earlier lease of the same row never matches a later one.
 */
const receiptPattern = /^([0-9a-z]{1,11})\.([0-9a-z]{1,10})$/;

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
