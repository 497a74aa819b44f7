// The chat API as the page calls it, with the session from sign-in. A call that gets no answer (the
// network is down, the server is restarting) rejects with an error whose `retryable` is true; an
// answer the server refused rejects with its status and code.

const sessionKey = "chat.session";

export class ChatApiError extends Error {
  constructor(message, { status = 0, code = "network_error", retryable = false } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryable = retryable;
  }
}

export function storedSession() {
  const text = localStorage.getItem(sessionKey);
  return text === null ? undefined : JSON.parse(text);
}

export function storeSession(session) {
  if (session === undefined) localStorage.removeItem(sessionKey);
  else localStorage.setItem(sessionKey, JSON.stringify(session));
}

export async function call(method, path, body) {
  const session = storedSession();
  let response;
  try {
    response = await fetch(path, {
      method,
      headers: {
        ...(session && { authorization: `Bearer ${session.session}` }),
        ...(body !== undefined && { "content-type": "application/json" }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  } catch (error) {
    throw new ChatApiError(`no answer: ${error}`, { retryable: true });
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const retryable = response.status >= 500 || response.status === 429;
    throw new ChatApiError(answer.error?.message ?? `HTTP ${response.status}`, {
      status: response.status,
      code: answer.error?.code ?? "http_error",
      retryable,
    });
  }
  return { status: response.status, body: answer };
}

/** A UUID made in the page before the first attempt; crypto.randomUUID needs a secure context. */
export function newMessageId() {
  if (crypto.randomUUID) return crypto.randomUUID();
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
