/**
 * How inbox answers look on the wire (API.md "Inboxes"): entries with a JSON body carry it as the JSON
 * value it was appended as, any other content type as base64; times are ISO-8601.
 */
import type { InboxInfo, RecipientInfo } from "../../broker/inboxes.js";
import type { InboxEntry } from "../../model/inbox.js";
import { jsonContentType } from "../../model/message-body.js";

/**
 * One entry as JSON text: `{ seq, id, contentType, headers, body | bodyBase64, appendedAt }`. A JSON
 * body goes in as the text it was stored as (it was checked to be JSON when it was appended), so a
 * read never parses a body only to serialize it again.
 */
export function inboxEntryJson(entry: InboxEntry): string {
  const body =
    entry.contentType === jsonContentType
      ? `"body":${typeof entry.body === "string" ? entry.body : entry.body.toString("utf8")}`
      : `"bodyBase64":"${(typeof entry.body === "string" ? Buffer.from(entry.body, "utf8") : entry.body).toString("base64")}"`;
  return (
    `{"seq":${entry.seq},"id":${JSON.stringify(entry.id)},"contentType":${JSON.stringify(entry.contentType)},` +
    `"headers":${JSON.stringify(entry.headers)},${body},"appendedAt":"${new Date(entry.appendedAt).toISOString()}"}`
  );
}

/** The answer of a read: `{ entries, head, oldest, epoch }`, as JSON text. */
export function inboxEntriesJson(read: {
  entries: readonly InboxEntry[];
  head: number;
  oldest: number;
  epoch: string;
}): string {
  return (
    `{"entries":[${read.entries.map(inboxEntryJson).join(",")}],"head":${read.head},` +
    `"oldest":${read.oldest},"epoch":${JSON.stringify(read.epoch)}}`
  );
}

export function renderInbox(inbox: InboxInfo): Record<string, unknown> {
  return { ...inbox, createdAt: new Date(inbox.createdAt).toISOString() };
}

export function renderRecipient(recipient: string, state: RecipientInfo): Record<string, unknown> {
  return {
    recipient,
    depth: state.depth,
    head: state.head,
    oldest: state.oldest,
    epoch: state.epoch,
    skippedAfter: state.skippedAfter,
    devices: state.devices.map((device) => ({
      device: device.device,
      cursor: device.cursor,
      lastSeenAt: new Date(device.lastSeenAt).toISOString(),
    })),
    connected: state.connected,
  };
}
