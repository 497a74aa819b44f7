// The ops strip: the chat API's /api/ops, read every second and drawn as tables. The figures come
// from Hopper through the chat API, which holds the API key; the page holds only its session.
import { call } from "./chat-api.js";

const refreshMs = 1_000;

function table(id, rows) {
  const element = document.getElementById(id);
  element.replaceChildren();
  if (rows.length === 0) return;
  const head = document.createElement("tr");
  for (const key of Object.keys(rows[0])) {
    const cell = document.createElement("th");
    cell.textContent = key;
    head.append(cell);
  }
  element.append(head);
  for (const row of rows) {
    const line = document.createElement("tr");
    for (const value of Object.values(row)) {
      const cell = document.createElement("td");
      cell.textContent = value === null ? "–" : String(value);
      line.append(cell);
    }
    element.append(line);
  }
}

async function refresh() {
  try {
    const { body } = await call("GET", "/api/ops");
    table("inbox", [body.inbox]);
    table("users", body.users);
    table("queues", body.queues);
    table("outbox", [body.outbox]);
    document.getElementById("updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    document.body.dataset.loaded = "true";
  } catch (error) {
    document.getElementById("updated").textContent =
      error.status === 401 ? "sign in on the chat page first" : `no answer (${error.message})`;
  }
}

await refresh();
setInterval(() => void refresh(), refreshMs);
