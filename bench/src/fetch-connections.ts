/**
 * The pooled connections of this process's global `fetch` (undici's global dispatcher, which Node
 * keeps under a symbol). A server's graceful stop waits for open connections, and a connection that
 * never carried a request (a pool opens such spares) never counts as idle, so the bench closes them
 * before it stops a server.
 */

const globalDispatcherKey = Symbol.for("undici.globalDispatcher.1");

interface Dispatcher {
  destroy?: () => Promise<void>;
}

/**
 * Destroys the global dispatcher's connections (`destroy` rather than `close`: after a stall requests
 * may still be pending) and installs a fresh dispatcher of the same kind, so that a later target in
 * the same run can use `fetch` again.
 */
export async function closeFetchConnections(): Promise<void> {
  const globals = globalThis as unknown as Record<symbol, Dispatcher | undefined>;
  const dispatcher = globals[globalDispatcherKey];
  if (dispatcher === undefined) return;
  const Fresh = dispatcher.constructor as new () => Dispatcher;
  globals[globalDispatcherKey] = new Fresh();
  await dispatcher.destroy?.();
}
