/**
 * Counts what clients send to PostgreSQL, for `--count-round-trips`: a TCP relay between the target
 * and PostgreSQL that reads the frontend protocol as it passes. pg_stat_statements needs a server
 * restart to load; this needs nothing from the server, and it counts only the target's own traffic.
 *
 * Round trips: each `Sync` (the end of one extended-protocol query: Parse/Bind/Execute/Sync) and each
 * simple `Query` waits for the server's answer before its result is known. Statements: each Parse or
 * simple Query, by the start of its text. The relay adds latency and costs this process CPU, so runs
 * that count report no speed figures worth comparing; they exist to count.
 *
 *   frontend message:  [type: 1 byte][length incl. itself: int32][payload]
 *   startup message:   [length: int32][protocol or request code: int32][payload]   (no type byte)
 */
import type { Socket } from "node:net";
import { TcpRelay } from "./tcp-relay.js";

/** SSLRequest and GSSENCRequest come before the real startup message, which then follows untyped. */
const encryptionRequestCodes = new Set([80877103, 80877104]);
/** Statement texts are grouped by this many leading characters, whitespace collapsed. */
const statementKeyChars = 90;

export interface WireCounts {
  roundTrips: number;
  statements: Record<string, number>;
}

export class PgWireCounter {
  private roundTrips = 0;
  private readonly statements = new Map<string, number>();

  private relay: TcpRelay | undefined;

  /** Starts relaying on a free loopback port to the host and port of `url`. */
  static async start(url: string): Promise<PgWireCounter> {
    const target = new URL(url);
    const counter = new PgWireCounter();
    counter.relay = await TcpRelay.start(
      { host: target.hostname, port: Number(target.port || 5432) },
      (client, server) => counter.pass(client, server),
    );
    return counter;
  }

  /** `url` with its host and port replaced by the relay's. */
  relayUrl(url: string): string {
    if (!this.relay) throw new Error("the relay is not listening");
    const relayed = new URL(url);
    relayed.hostname = "127.0.0.1";
    relayed.port = String(this.relay.port);
    return relayed.toString();
  }

  snapshot(): WireCounts {
    return { roundTrips: this.roundTrips, statements: Object.fromEntries(this.statements) };
  }

  async close(): Promise<void> {
    await this.relay?.close();
  }

  /** Server bytes go straight back; client bytes are read as frontend messages on their way. */
  private pass(client: Socket, server: Socket): void {
    server.pipe(client);
    const parser = new FrontendParser((type, payload) => this.count(type, payload));
    client.on("data", (chunk: Buffer) => {
      parser.push(chunk);
      server.write(chunk);
    });
  }

  private count(type: string, payload: Buffer | undefined): void {
    if (type === "S") {
      this.roundTrips++;
      return;
    }
    if (payload === undefined) return;
    let text: string;
    if (type === "Q") {
      this.roundTrips++;
      text = payload.toString("utf8", 0, payload.indexOf(0));
    } else {
      // Parse: [statement name]\0[query]\0…
      const nameEnd = payload.indexOf(0);
      text = payload.toString("utf8", nameEnd + 1, payload.indexOf(0, nameEnd + 1));
    }
    const key = text.replace(/\s+/g, " ").trim().slice(0, statementKeyChars);
    this.statements.set(key, (this.statements.get(key) ?? 0) + 1);
  }
}

/** Splits the client's byte stream into messages; hands over the payload of Parse and Query only. */
class FrontendParser {
  private pending = Buffer.alloc(0);
  private skipBytes = 0;
  private awaitingStartup = true;

  constructor(private readonly onMessage: (type: string, payload: Buffer | undefined) => void) {}

  push(chunk: Buffer): void {
    let buffer = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    let offset = 0;
    // Each pass consumes at least one byte or stops, so the loop is bounded by the chunk's length.
    while (offset < buffer.length) {
      if (this.skipBytes > 0) {
        const skipped = Math.min(this.skipBytes, buffer.length - offset);
        this.skipBytes -= skipped;
        offset += skipped;
        continue;
      }
      if (this.awaitingStartup) {
        if (buffer.length - offset < 8) break;
        const length = buffer.readInt32BE(offset);
        const code = buffer.readInt32BE(offset + 4);
        this.awaitingStartup = encryptionRequestCodes.has(code);
        this.skipBytes = length;
        continue;
      }
      if (buffer.length - offset < 5) break;
      const type = String.fromCharCode(buffer[offset] as number);
      const length = buffer.readInt32BE(offset + 1);
      if (type === "P" || type === "Q") {
        if (buffer.length - offset < 1 + length) break;
        this.onMessage(type, buffer.subarray(offset + 5, offset + 1 + length));
        offset += 1 + length;
      } else {
        this.onMessage(type, undefined);
        this.skipBytes = 1 + length;
      }
    }
    buffer = buffer.subarray(offset);
    // Kept only while a header or a Parse/Query is incomplete: both are small.
    this.pending = Buffer.from(buffer);
  }
}
