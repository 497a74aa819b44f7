/** What a long-polling route ends its wait by. */
import type { ServerResponse } from "node:http";

/** Aborts when the client goes away before the answer is sent, so a long poll stops waiting. */
export function abortOnClose(raw: ServerResponse): AbortSignal {
  const controller = new AbortController();
  raw.on("close", () => {
    if (!raw.writableFinished) controller.abort();
  });
  return controller.signal;
}
