/**
 * A TCP relay on a free loopback port to one upstream port, which a test can cut for real: `cut()`
 * destroys every open connection (a browser's WebSockets and keep-alive fetches see them drop) and
 * refuses new ones until `restore()`. Playwright's offline mode does not close open WebSockets; this
 * does, as a lost network would.
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export class TcpRelay {
  private readonly sockets = new Set<Socket>();
  private isCut = false;

  private constructor(private readonly server: Server) {}

  static async start(upstreamPort: number): Promise<TcpRelay> {
    const server = createServer();
    const relay = new TcpRelay(server);
    server.on("connection", (client) => relay.pair(client, upstreamPort));
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    return relay;
  }

  get port(): number {
    const address = this.server.address();
    if (address === null || typeof address === "string") throw new Error("the relay is not listening");
    return address.port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Drops every connection and refuses new ones. */
  cut(): void {
    this.isCut = true;
    for (const socket of this.sockets) socket.destroy();
    this.sockets.clear();
  }

  restore(): void {
    this.isCut = false;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pair(client: Socket, upstreamPort: number): void {
    if (this.isCut) {
      client.destroy();
      return;
    }
    const upstream = connect(upstreamPort, "127.0.0.1");
    this.sockets.add(client);
    this.sockets.add(upstream);
    const end = () => {
      client.destroy();
      upstream.destroy();
      this.sockets.delete(client);
      this.sockets.delete(upstream);
    };
    for (const socket of [client, upstream]) {
      socket.on("error", end);
      socket.on("close", end);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  }
}
