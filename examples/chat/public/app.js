// The chat page. It keeps every conversation's messages by id (so a duplicate or a late event changes
// nothing) and draws them in sequence order; sends with a UUID made before the first attempt, from a
// queue in IndexedDB that survives a reload; reads its inbox from its cursor in localStorage; posts
// delivered and read receipts; shows typing from signals; and reloads history when it finds a gap.
import { HopperClient, localStorageCursor } from "@hopper/client";
import { ChatApiError, call, newMessageId, storedSession, storeSession } from "./chat-api.js";
import * as outgoing from "./outgoing.js";
import { renderConversations, renderMessages, renderStatus, renderTyping } from "./render.js";

/** How often waiting sends and receipts are tried again while they cannot get through. */
const retryIntervalMs = 1_000;
/** A typing signal is sent at most this often while keys are pressed. */
const typingRepeatMs = 2_000;
/** Typing counts as stopped this long after the last key, and is shown this long without news. */
const typingIdleMs = 3_000;
const typingShownMs = 5_000;

const $ = (id) => document.getElementById(id);

const state = {
  user: undefined,
  device: undefined,
  conversations: new Map(),
  openId: undefined,
  typing: new Map(),
  connection: "connecting",
  waitingCount: 0,
  hopper: undefined,
  inbox: undefined,
  typingSubscription: undefined,
};
const receiptsToSend = { delivered: new Set(), read: new Set() };
let flushing = false;
let receiptsFlushing = false;
let lastTypingSentAt = 0;
let typingIdleTimer;
let refreshTimer;

function render() {
  renderConversations(state, openConversation);
  renderMessages(state);
  renderTyping(state);
  renderStatus(state);
}

function setConnection(connection) {
  if (state.connection === connection) return;
  state.connection = connection;
  renderStatus(state);
}

/** This tab's device name: kept across reloads of the tab, new in a new tab (its own cursor). */
function deviceName() {
  let device = sessionStorage.getItem("chat.device");
  if (device === null) {
    device = `web-${newMessageId().slice(0, 8)}`;
    sessionStorage.setItem("chat.device", device);
  }
  return device;
}

function conversationOf(view) {
  let conversation = state.conversations.get(view.id);
  if (conversation === undefined) {
    conversation = { ...view, messages: new Map(), receipts: new Map(), seqs: new Set(), contiguousSeq: 0 };
    state.conversations.set(view.id, conversation);
  } else {
    Object.assign(conversation, { title: view.title, members: view.members });
  }
  return conversation;
}

function receiptsOf(conversation, messageId) {
  let receipts = conversation.receipts.get(messageId);
  if (receipts === undefined) {
    receipts = { delivered: new Set(), read: new Set() };
    conversation.receipts.set(messageId, receipts);
  }
  return receipts;
}

/** Adds a stored message once; a repeat (replay, history, a resend's answer) changes nothing. */
function mergeMessage(conversation, message) {
  const known = conversation.messages.get(message.id);
  if (known?.seq !== undefined) return false;
  conversation.messages.set(message.id, {
    id: message.id,
    seq: message.seq,
    sender: message.sender,
    text: message.text,
    createdAt: message.createdAt,
  });
  conversation.seqs.add(message.seq);
  while (conversation.seqs.has(conversation.contiguousSeq + 1)) conversation.contiguousSeq += 1;
  if (message.sender !== state.user) {
    if (!receiptsOf(conversation, message.id).delivered.has(state.user))
      receiptsToSend.delivered.add(message.id);
  }
  return true;
}

/** Loads what history has after what this page holds without a hole (everything, the first time). */
async function loadHistory(conversation) {
  const { body } = await call(
    "GET",
    `/api/conversations/${conversation.id}/messages?after=${conversation.contiguousSeq}`,
  );
  for (const message of body.messages) {
    const receipts = receiptsOf(conversation, message.id);
    for (const user of message.delivered) receipts.delivered.add(user);
    for (const user of message.read) receipts.read.add(user);
    mergeMessage(conversation, message);
  }
}

async function loadConversations() {
  const { body } = await call("GET", "/api/conversations");
  const fresh = body.conversations.filter((view) => !state.conversations.has(view.id));
  for (const view of body.conversations) conversationOf(view);
  for (const view of fresh) await loadHistory(state.conversations.get(view.id));
  return fresh.length;
}

function onMessageEntry(message) {
  const conversation = state.conversations.get(message.conversationId);
  if (conversation === undefined) {
    // A conversation this page has not heard of: load it, and a token that covers its typing channel.
    void loadConversations()
      .then(() => connectHopper())
      .then(render, reportError);
    return;
  }
  if (message.seq > conversation.contiguousSeq + 1) {
    // A hole in the conversation's sequence: what is missing is in history.
    void loadHistory(conversation).then(render, reportError);
  }
  mergeMessage(conversation, message);
  if (conversation.id === state.openId) markRead(conversation);
}

function onEntry(entry) {
  const body = entry.body;
  if (body?.type === "message") onMessageEntry(body.message);
  else if (body?.type === "receipt") {
    const conversation = state.conversations.get(body.conversationId);
    if (conversation !== undefined) receiptsOf(conversation, body.messageId)[body.state].add(body.user);
  }
  setConnection("online");
  render();
  void flushReceipts();
}

/** Entries were trimmed before this device read them: reload every conversation from history. */
async function onGap() {
  for (const conversation of state.conversations.values()) {
    conversation.contiguousSeq = 0;
    await loadHistory(conversation);
  }
  render();
}

function markRead(conversation) {
  if (document.visibilityState !== "visible") return;
  for (const message of conversation.messages.values()) {
    if (message.sender !== state.user && !receiptsOf(conversation, message.id).read.has(state.user)) {
      receiptsToSend.read.add(message.id);
    }
  }
  void flushReceipts();
}

/** Posts the receipts not yet stored, one call at a time (a second flush meanwhile waits for the next). */
async function flushReceipts() {
  if (receiptsFlushing) return;
  receiptsFlushing = true;
  try {
    await postReceipts();
  } finally {
    receiptsFlushing = false;
  }
}

async function postReceipts() {
  for (const receiptState of ["delivered", "read"]) {
    const ids = [...receiptsToSend[receiptState]].slice(0, 100);
    if (ids.length === 0) continue;
    try {
      await call("POST", "/api/receipts", { state: receiptState, messageIds: ids });
      for (const id of ids) receiptsToSend[receiptState].delete(id);
      for (const conversation of state.conversations.values()) {
        for (const id of ids)
          if (conversation.messages.has(id)) receiptsOf(conversation, id)[receiptState].add(state.user);
      }
    } catch (error) {
      if (error instanceof ChatApiError && error.retryable) {
        setConnection("offline");
        return;
      }
      // Refused (not a member any more, say): sending it again would be refused again.
      for (const id of ids) receiptsToSend[receiptState].delete(id);
      reportError(error);
    }
  }
}

/** Sends what waits in IndexedDB, oldest first, each with its own id; stops at the first that cannot get through. */
async function flushOutgoing() {
  if (flushing) return;
  flushing = true;
  try {
    const waiting = await outgoing.list(state.user);
    state.waitingCount = waiting.length;
    for (const item of waiting) {
      const conversation = state.conversations.get(item.conversationId);
      try {
        const { body } = await call("POST", `/api/conversations/${item.conversationId}/messages`, {
          id: item.id,
          text: item.text,
        });
        await outgoing.remove(item.id);
        if (conversation !== undefined) mergeMessage(conversation, body.message);
        setConnection("online");
      } catch (error) {
        if (error instanceof ChatApiError && error.retryable) {
          setConnection("offline");
          break;
        }
        await outgoing.remove(item.id);
        const shown = conversation?.messages.get(item.id);
        if (shown !== undefined) shown.failed = true;
      }
      state.waitingCount -= 1;
    }
  } finally {
    flushing = false;
    render();
  }
}

async function send(text) {
  const conversation = state.conversations.get(state.openId);
  if (conversation === undefined) return;
  const item = {
    id: newMessageId(),
    user: state.user,
    conversationId: conversation.id,
    text,
    createdAt: new Date().toISOString(),
  };
  await outgoing.put(item);
  conversation.messages.set(item.id, { id: item.id, sender: state.user, text, createdAt: item.createdAt });
  render();
  void publishTyping(false);
  await flushOutgoing();
}

async function publishTyping(typing) {
  if (state.hopper === undefined || state.openId === undefined) return;
  clearTimeout(typingIdleTimer);
  if (typing) {
    typingIdleTimer = setTimeout(() => void publishTyping(false), typingIdleMs);
    if (Date.now() - lastTypingSentAt < typingRepeatMs) return;
    lastTypingSentAt = Date.now();
  } else {
    if (lastTypingSentAt === 0) return;
    lastTypingSentAt = 0;
  }
  await state.hopper.signals.publish(`conv.${state.openId}`, { user: state.user, typing }).catch(() => {});
}

function onTyping(conversationId, data) {
  if (data?.user === undefined || data.user === state.user) return;
  const typing = state.typing.get(conversationId) ?? new Map();
  state.typing.set(conversationId, typing);
  clearTimeout(typing.get(data.user));
  if (data.typing) {
    const stopped = { user: data.user, typing: false };
    typing.set(
      data.user,
      setTimeout(() => onTyping(conversationId, stopped), typingShownMs),
    );
  } else {
    typing.delete(data.user);
  }
  renderTyping(state);
}

async function subscribeTyping() {
  const subscription = state.typingSubscription;
  state.typingSubscription = undefined;
  await subscription?.unsubscribe().catch(() => {});
  const conversationId = state.openId;
  if (state.hopper === undefined || conversationId === undefined) return;
  state.typingSubscription = await state.hopper.signals.subscribe(`conv.${conversationId}`, (data) =>
    onTyping(conversationId, data),
  );
}

function openConversation(id) {
  state.openId = id;
  render();
  markRead(state.conversations.get(id));
  void subscribeTyping().catch(reportError);
}

/**
 * Connects to Hopper with a fresh device token: the inbox from this device's cursor (on the first load
 * of a device, from the head read before history), and typing for the open conversation. Called again
 * for a token that lists a new conversation, and before the token expires.
 */
async function connectHopper(position) {
  const { body } = await call("POST", "/api/token");
  const previous = state.hopper;
  state.typingSubscription = undefined;
  state.hopper = new HopperClient({ url: body.hopperUrl, token: body.token });
  // A dropped signal connection is replaced by the client; the page only says it is offline meanwhile.
  state.hopper.signals.configure({ onError: () => setConnection("offline") });
  await previous?.close();
  const cursorStore = localStorageCursor(`chat.cursor.${state.user}.${state.device}`);
  state.inbox = await state.hopper.inboxes.subscribe({
    ns: "chat",
    device: state.device,
    ...(position && { after: position.head, epoch: position.epoch }),
    cursorStore,
    onEntry,
    onGap: () => onGap().catch(reportError),
    onError: () => setConnection("offline"),
  });
  await subscribeTyping();
  clearTimeout(refreshTimer);
  const refreshInMs = Math.max(60_000, (new Date(body.expiresAt).getTime() - Date.now()) * 0.8);
  refreshTimer = setTimeout(() => void connectHopper().catch(reportError), refreshInMs);
  return state.inbox.ready;
}

async function boot(session) {
  state.user = session.user;
  state.device = deviceName();
  $("me").textContent = `${state.user} (${state.device})`;
  $("signin").hidden = true;
  $("chat").hidden = false;
  $("signout").hidden = false;
  // The first load of a device reads its inbox head before history, so nothing falls between the two.
  const cursorKey = `chat.cursor.${state.user}.${state.device}`;
  const position =
    localStorage.getItem(cursorKey) === null ? (await call("GET", "/api/inbox/position")).body : undefined;
  await loadConversations();
  for (const item of await outgoing.list(state.user)) {
    const conversation = state.conversations.get(item.conversationId);
    conversation?.messages.set(item.id, {
      id: item.id,
      sender: state.user,
      text: item.text,
      createdAt: item.createdAt,
    });
  }
  render();
  await connectHopper(position);
  setConnection("online");
  await Promise.all([flushOutgoing(), flushReceipts()]);
  window.chatReady = true;
}

function reportError(error) {
  console.error("chat:", error);
}

function wireForms() {
  $("signin").addEventListener("submit", async (event) => {
    event.preventDefault();
    window.chatReady = false;
    const { body } = await call("POST", "/api/signin", { name: $("signin-name").value.trim() });
    storeSession({ user: body.user, session: body.session });
    start(storedSession());
  });
  $("signout").addEventListener("click", async () => {
    storeSession(undefined);
    await state.hopper?.close();
    location.reload();
  });
  $("new-conversation").addEventListener("submit", async (event) => {
    event.preventDefault();
    const members = $("new-members")
      .value.split(",")
      .map((name) => name.trim())
      .filter((name) => name !== "");
    const { body } = await call("POST", "/api/conversations", { members });
    $("new-members").value = "";
    conversationOf(body.conversation);
    await connectHopper();
    openConversation(body.conversation.id);
  });
  $("composer").addEventListener("submit", (event) => {
    event.preventDefault();
    const text = $("composer-text").value;
    $("composer-text").value = "";
    if (text.trim() !== "") void send(text).catch(reportError);
  });
  $("composer-text").addEventListener("input", () => void publishTyping(true));
  document.addEventListener("visibilitychange", () => {
    const conversation = state.conversations.get(state.openId);
    if (conversation !== undefined) markRead(conversation);
  });
  window.addEventListener("online", () => void flushAll());
}

function flushAll() {
  if (state.user === undefined) return Promise.resolve();
  return Promise.all([flushOutgoing(), flushReceipts()]).catch(reportError);
}

wireForms();
window.addEventListener("unhandledrejection", (event) => reportError(event.reason?.stack ?? event.reason));
setInterval(() => void flushAll(), retryIntervalMs);
/** Boots, and while the chat API cannot be reached, tries again: a page opened offline starts once online. */
function start(session) {
  boot(session).catch((error) => {
    setConnection("offline");
    if (error instanceof ChatApiError && error.retryable) setTimeout(() => start(session), retryIntervalMs);
    else reportError(error);
  });
}

const session = storedSession();
if (session === undefined) {
  $("signin").hidden = false;
  window.chatReady = true;
} else {
  start(session);
}
