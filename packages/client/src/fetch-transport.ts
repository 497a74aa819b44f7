// How the client sends one HTTP request over `fetch`, and the transport interface every way of sending
// implements. It imports nothing, so a browser bundle of the client takes it without `node:http`
// (http-transport.ts has the Node transport, platform.ts picks one).

/** One request as the client makes it: the body, when there is one, is already JSON text. */
export interface HttpRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
  signal: AbortSignal;
}

/** What the client reads of an answer. */
export interface HttpAnswer {
  status: number;
  text: string;
  retryAfter: string | null;
}

export interface HttpTransport {
  /** Resolves with the whole answer; rejects on a network failure or when `signal` aborts. */
  request(request: HttpRequest): Promise<HttpAnswer>;
  /** Closes the connections kept open between requests. */
  close(): void;
}

/** A transport over `fetch`: the caller's (tests, browsers, instrumented fetches) or the global one. */
export function fetchTransport(fetchFn: typeof fetch): HttpTransport {
  return {
    async request({ method, url, headers, body, signal }) {
      const response = await fetchFn(url, { method, headers, body, signal });
      const text = await response.text();
      return { status: response.status, text, retryAfter: response.headers.get("retry-after") };
    },
    close() {},
  };
}
