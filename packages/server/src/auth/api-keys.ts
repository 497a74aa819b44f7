/**
 * Service authentication with API keys. Keys are compared in constant time: both sides are hashed to
 * equal length first, and every configured key is compared, so timing says nothing about which key
 * or how much of it matched.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP } from "node:net";

export type AuthDecision = "allow" | "unauthorized" | "forbidden";

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

export function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  if (address === "::1") return true;
  const v4 = address.startsWith("::ffff:") ? address.slice(7) : address;
  return isIP(v4) === 4 && v4.startsWith("127.");
}

export class ApiKeys {
  private readonly digests: Buffer[];

  constructor(keys: readonly string[]) {
    this.digests = keys.filter((key) => key.length > 0).map(digest);
  }

  get configured(): boolean {
    return this.digests.length > 0;
  }

  /**
   * With keys configured, a request needs `Authorization: Bearer <key>`. With none, only loopback
   * clients are served, so a broker started without keys is never open to the network.
   */
  decide(authorization: string | undefined, remoteAddress: string | undefined): AuthDecision {
    if (!this.configured) return isLoopback(remoteAddress) ? "allow" : "forbidden";
    // The scheme is case-insensitive (RFC 9110 §11.1); the key is not.
    const match = /^Bearer +(.+)$/i.exec(authorization ?? "");
    if (!match) return "unauthorized";
    const presented = digest(match[1] as string);
    let found = false;
    for (const known of this.digests) found = timingSafeEqual(known, presented) || found;
    return found ? "allow" : "unauthorized";
  }
}
