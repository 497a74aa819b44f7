/**
 * Counts WebSocket frames between push consumers and a Hopper server, for `--count-frames`: a TCP
 * relay in front of one server that reads the frames as they pass (RFC 6455 framing; Hopper's server
 * does not negotiate compression, so payloads are plain JSON text). Client → server frames are
 * unmasked and parsed, so an `ack` frame's receipts are counted; server → client frames are counted by
 * their `op` (read from the first bytes) and their payload is skipped. Plain HTTP connections through
 * the relay (the consumer's stats requests) pass uncounted. Like `--count-round-trips`, the relay adds
 * a hop and costs this process CPU, so the speed figures of a counting run are not comparable.
 *
 *   frame: [FIN, RSV, opcode: 1 byte][MASK, length: 1 byte][length: 0, 2 or 8 bytes][mask: 0 or 4][payload]
 */
import type { Socket } from "node:net";
import { TcpRelay } from "./tcp-relay.js";

/** The op of a server frame is in its first bytes: `{"op":"deliver",…`. */
const opPrefixBytes = 32;
const opPattern = /^\{"op":"([^"]+)"/;
/** A client frame larger than this is not one of the small control frames; it is counted, not parsed. */
const clientFrameParsedBytesMax = 1024 * 1024;
const headerEnd = Buffer.from("\r\n\r\n");
/** An HTTP head longer than this is not a request line and headers; give up and pass it through. */
const httpHeadBytesMax = 64 * 1024;

export class WsFrameCounter {
  /** By name: `ws→ ack` (client frames by op), `ws→ ack receipts`, `ws← deliver` (server frames by
   * op), `ws← chunks` (TCP reads from the server on WebSocket connections). */
  private readonly counts = new Map<string, number>();

  private relay: TcpRelay | undefined;

  /** Starts relaying on a free loopback port to the host and port of the server's `url`. */
  static async start(url: string): Promise<WsFrameCounter> {
    const target = new URL(url);
    const counter = new WsFrameCounter();
    counter.relay = await TcpRelay.start(
      { host: target.hostname, port: Number(target.port) },
      (client, server) => counter.pass(client, server),
    );
    return counter;
  }

  /** The server's URL with the relay's host and port. */
  get url(): string {
    if (!this.relay) throw new Error("the relay is not listening");
    return `http://127.0.0.1:${this.relay.port}`;
  }

  snapshot(): Record<string, number> {
    return Object.fromEntries(this.counts);
  }

  async close(): Promise<void> {
    await this.relay?.close();
  }

  private add(name: string, count = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + count);
  }

  /** Moves the bytes both ways, reading WebSocket frames on the way once the upgrade is seen. */
  private pass(client: Socket, server: Socket): void {
    // Both directions start as HTTP; the request's head says whether this is a WebSocket upgrade.
    let isWebSocket: boolean | undefined;
    let requestHead = Buffer.alloc(0);
    let responseHead: Buffer | undefined = Buffer.alloc(0);
    const fromClient = new FrameParser(true, (op) => this.add(`ws→ ${op}`));
    fromClient.onReceipts = (op, receipts) => this.add(`ws→ ${op} receipts`, receipts);
    const fromServer = new FrameParser(false, (op) => this.add(`ws← ${op}`));
    client.on("data", (chunk: Buffer) => {
      server.write(chunk);
      if (isWebSocket === false) return;
      if (isWebSocket === undefined) {
        requestHead = Buffer.concat([requestHead, chunk]);
        const end = requestHead.indexOf(headerEnd);
        if (end < 0) {
          if (requestHead.length > httpHeadBytesMax) isWebSocket = false;
          return;
        }
        isWebSocket =
          /^GET [^\r]*\r\n/.test(requestHead.toString("latin1", 0, 64)) &&
          /\r\nupgrade:\s*websocket\r\n/i.test(requestHead.toString("latin1", 0, end + 2));
        if (!isWebSocket) return;
        fromClient.push(requestHead.subarray(end + headerEnd.length));
        return;
      }
      fromClient.push(chunk);
    });
    server.on("data", (chunk: Buffer) => {
      client.write(chunk);
      if (isWebSocket !== true) return;
      this.add("ws← chunks");
      if (responseHead !== undefined) {
        responseHead = Buffer.concat([responseHead, chunk]);
        const end = responseHead.indexOf(headerEnd);
        if (end < 0) return;
        const rest = responseHead.subarray(end + headerEnd.length);
        responseHead = undefined;
        fromServer.push(rest);
        return;
      }
      fromServer.push(chunk);
    });
  }
}

/**
 * Splits one direction's byte stream into frames. Masked (client) frames are read whole and parsed as
 * JSON, to name their op and count an ack's receipts; unmasked (server) frames are named from their
 * first bytes and the rest of the payload is skipped unbuffered.
 */
class FrameParser {
  onReceipts: ((op: string, receipts: number) => void) | undefined;
  private pending = Buffer.alloc(0);
  private skipBytes = 0;

  constructor(
    private readonly readsWholeFrames: boolean,
    private readonly onFrame: (op: string) => void,
  ) {}

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
      const available = buffer.length - offset;
      if (available < 2) break;
      const first = buffer[offset] as number;
      const second = buffer[offset + 1] as number;
      let length = second & 0x7f;
      let headerBytes = 2;
      if (length === 126) {
        if (available < 4) break;
        length = buffer.readUInt16BE(offset + 2);
        headerBytes = 4;
      } else if (length === 127) {
        if (available < 10) break;
        length = Number(buffer.readBigUInt64BE(offset + 2));
        headerBytes = 10;
      }
      const masked = (second & 0x80) !== 0;
      if (masked) headerBytes += 4;
      const opcode = first & 0x0f;
      if (opcode !== 1) {
        // Continuation, binary, close, ping, pong: counted by kind, never parsed.
        if (available < headerBytes) break;
        this.onFrame(opcodeName(opcode));
        offset += headerBytes;
        this.skipBytes = length;
        continue;
      }
      if (this.readsWholeFrames && length <= clientFrameParsedBytesMax) {
        if (available < headerBytes + length) break;
        const payload = Buffer.from(buffer.subarray(offset + headerBytes, offset + headerBytes + length));
        if (masked) {
          const mask = buffer.subarray(offset + headerBytes - 4, offset + headerBytes);
          for (let index = 0; index < payload.length; index++) {
            payload[index] = (payload[index] as number) ^ (mask[index & 3] as number);
          }
        }
        this.countClientFrame(payload.toString("utf8"));
        offset += headerBytes + length;
        continue;
      }
      const prefix = Math.min(length, opPrefixBytes);
      if (available < headerBytes + prefix) break;
      const text = buffer.toString("utf8", offset + headerBytes, offset + headerBytes + prefix);
      this.onFrame(opPattern.exec(text)?.[1] ?? "text");
      offset += headerBytes;
      this.skipBytes = length;
    }
    buffer = buffer.subarray(offset);
    // Kept only while a header, a server frame's first bytes or a small client frame is incomplete.
    this.pending = Buffer.from(buffer);
  }

  private countClientFrame(text: string): void {
    let frame: { op?: unknown; receipts?: unknown };
    try {
      frame = JSON.parse(text) as typeof frame;
    } catch {
      this.onFrame("not JSON");
      return;
    }
    const op = typeof frame.op === "string" ? frame.op : "no op";
    this.onFrame(op);
    if (Array.isArray(frame.receipts)) this.onReceipts?.(op, frame.receipts.length);
  }
}

function opcodeName(opcode: number): string {
  const names: Record<number, string> = { 0: "continuation", 2: "binary", 8: "close", 9: "ping", 10: "pong" };
  return names[opcode] ?? `opcode ${opcode}`;
}
