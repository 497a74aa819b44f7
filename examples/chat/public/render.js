// Drawing the page from the state app.js keeps. Messages are drawn in their conversation's sequence
// order whatever order they arrived in, each id once; messages still waiting to be stored come last.

const $ = (id) => document.getElementById(id);

/** The tick of one of my messages: waiting, stored, received by every other member, read by them. */
export function tickState(conversation, message, me) {
  if (message.failed) return "failed";
  if (message.seq === undefined) return "pending";
  const others = conversation.members.filter((member) => member !== me);
  const receipts = conversation.receipts.get(message.id);
  const read = receipts?.read ?? new Set();
  const delivered = new Set([...(receipts?.delivered ?? []), ...read]);
  if (others.length > 0 && others.every((member) => read.has(member))) return "read";
  if (others.length > 0 && others.every((member) => delivered.has(member))) return "delivered";
  return "sent";
}

const tickText = { pending: "🕓", sent: "✓", delivered: "✓✓", read: "✓✓", failed: "not sent" };

export function orderedMessages(conversation) {
  return [...conversation.messages.values()].sort((a, b) => {
    if (a.seq !== undefined && b.seq !== undefined) return a.seq - b.seq;
    if (a.seq !== undefined) return -1;
    if (b.seq !== undefined) return 1;
    return a.createdAt.localeCompare(b.createdAt);
  });
}

export function renderConversations(state, onOpen) {
  const list = $("conversations");
  list.replaceChildren();
  for (const conversation of state.conversations.values()) {
    const item = document.createElement("li");
    item.className = "conversation";
    item.dataset.id = conversation.id;
    item.setAttribute("aria-current", String(conversation.id === state.openId));
    item.textContent = conversation.title;
    const unread = unreadCount(conversation, state.user);
    if (unread > 0) {
      const badge = document.createElement("span");
      badge.className = "unread";
      badge.textContent = String(unread);
      item.append(badge);
    }
    item.addEventListener("click", () => onOpen(conversation.id));
    list.append(item);
  }
}

export function unreadCount(conversation, me) {
  let count = 0;
  for (const message of conversation.messages.values()) {
    if (message.sender !== me && !conversation.receipts.get(message.id)?.read.has(me)) count += 1;
  }
  return count;
}

export function renderMessages(state) {
  const conversation = state.conversations.get(state.openId);
  $("composer").hidden = conversation === undefined;
  $("conversation-title").textContent = conversation?.title ?? "Pick a conversation";
  const list = $("messages");
  list.replaceChildren();
  if (conversation === undefined) return;
  for (const message of orderedMessages(conversation)) {
    const mine = message.sender === state.user;
    const item = document.createElement("li");
    item.className = mine ? "message mine" : "message";
    item.dataset.id = message.id;
    if (message.seq !== undefined) item.dataset.seq = String(message.seq);
    const sender = document.createElement("span");
    sender.className = "sender";
    sender.textContent = message.sender;
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = message.text;
    item.append(sender, text);
    if (mine) {
      const ticks = document.createElement("span");
      ticks.className = "ticks";
      ticks.dataset.state = tickState(conversation, message, state.user);
      ticks.textContent = tickText[ticks.dataset.state];
      item.append(ticks);
    }
    list.append(item);
  }
  list.scrollTop = list.scrollHeight;
}

export function renderTyping(state) {
  const typing = state.typing.get(state.openId);
  const names = typing === undefined ? [] : [...typing.keys()];
  $("typing").hidden = names.length === 0;
  $("typing").textContent =
    names.length === 0 ? "" : `${names.join(", ")} ${names.length === 1 ? "is" : "are"} typing…`;
}

export function renderStatus(state) {
  const status = $("status");
  const waiting = state.waitingCount > 0 ? `, ${state.waitingCount} waiting to send` : "";
  status.dataset.state = state.connection;
  status.textContent = `${state.connection}${waiting}`;
}
