/**
 * A TCP relay on a free loopback port to one upstream host and port, for the counters that read a
 * protocol as it passes (pg-wire-counter, ws-frame-counter). It pairs each client with a fresh
 * upstream connection, ends both when either ends, and hands the pair to `onPair`, which moves the
 * bytes (and reads them on the way).
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export class TcpRelay {
  private readonly sockets = new Set<Socket>();

  private constructor(private readonly server: Server) {}

  static async start(
    upstream: { host: string; port: number },
    onPair: (client: Socket, upstream: Socket) => void,
  ): Promise<TcpRelay> {
    const server = createServer();
    const relay = new TcpRelay(server);
    server.on("connection", (client) => {
      const toUpstream = connect(upstream.port, upstream.host);
      relay.sockets.add(client);
      relay.sockets.add(toUpstream);
      const end = () => {
        client.destroy();
        toUpstream.destroy();
        relay.sockets.delete(client);
        relay.sockets.delete(toUpstream);
      };
      for (const socket of [client, toUpstream]) {
        socket.on("error", end);
        socket.on("close", end);
      }
      onPair(client, toUpstream);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return relay;
  }

  /** The loopback port the relay listens on. */
  get port(): number {
    const address = this.server.address();
    if (address === null || typeof address === "string") throw new Error("the relay is not listening");
    return address.port;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
