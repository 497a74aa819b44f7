// The page's own queue of messages not yet stored by the chat API, in IndexedDB, so a message written
// while offline survives a reload or a closed tab and is sent once the page is back online. Each item
// keeps the UUID it was made with: every attempt sends the same id, and the API stores it once.

const dbName = "hopper-chat";
const storeName = "outgoing";

function request(idbRequest) {
  return new Promise((resolve, reject) => {
    idbRequest.onsuccess = () => resolve(idbRequest.result);
    idbRequest.onerror = () => reject(idbRequest.error);
  });
}

let opened;
function database() {
  opened ??= new Promise((resolve, reject) => {
    const open = indexedDB.open(dbName, 1);
    open.onupgradeneeded = () => open.result.createObjectStore(storeName, { keyPath: "id" });
    open.onsuccess = () => resolve(open.result);
    open.onerror = () => reject(open.error);
  });
  return opened;
}

async function store(mode) {
  const db = await database();
  return db.transaction(storeName, mode).objectStore(storeName);
}

/** Keeps an item `{ id, user, conversationId, text, createdAt }` until `remove(id)`. */
export async function put(item) {
  await request((await store("readwrite")).put(item));
}

export async function remove(id) {
  await request((await store("readwrite")).delete(id));
}

/** The user's waiting items, oldest first. */
export async function list(user) {
  const all = await request((await store("readonly")).getAll());
  return all.filter((item) => item.user === user).sort((a, b) => a.createdAt.localeCompare(b.createdAt));
}
