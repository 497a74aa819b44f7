/**
 * `npm run chat`: starts Hopper (embedded SQLite), the stand-in push vendor and webhook receiver, the
 * chat API with the web page, the outbox relay and the three workers, each as its own process, and
 * prints the page's address. State is kept in examples/chat/hopper-data/, so a restart keeps the
 * conversations; delete the folder to start afresh. Ctrl-C stops everything.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type RunningProcess, startHopper, startRole } from "./processes.js";

const dataDir = fileURLToPath(new URL("../hopper-data/", import.meta.url));

/** The API key and JWT secret, made once and kept with the data so a restart reuses them. */
function secrets(): { apiKey: string; jwtSecret: string } {
  const file = join(dataDir, "secrets.json");
  if (existsSync(file))
    return JSON.parse(readFileSync(file, "utf8")) as { apiKey: string; jwtSecret: string };
  const made = { apiKey: randomBytes(24).toString("hex"), jwtSecret: randomBytes(32).toString("hex") };
  writeFileSync(file, JSON.stringify(made), { mode: 0o600 });
  return made;
}

mkdirSync(dataDir, { recursive: true });
const { apiKey, jwtSecret } = secrets();
const started: RunningProcess[] = [];
const hopper = await startHopper({
  dataFile: join(dataDir, "hopper.db"),
  apiKey,
  jwtSecret,
  port: Number(process.env.HOPPER_PORT ?? 7171),
});
started.push(hopper);
const vendor = await startRole("vendor", { STANDIN_SEED: "7" });
const webhook = await startRole("webhook", { STANDIN_SEED: "8" });
started.push(vendor, webhook);
const env = {
  HOPPER_URL: hopper.url,
  HOPPER_API_KEY: apiKey,
  CHAT_DB: join(dataDir, "chat.db"),
  CHAT_JWT_SECRET: jwtSecret,
  CHAT_PORT: process.env.CHAT_PORT ?? "8080",
  PUSH_VENDOR_URL: vendor.url,
  WEBHOOK_URL: `${webhook.url}/hook`,
};
const api = await startRole("api", env);
started.push(api);
for (const role of ["relay", "realtime", "push", "integrations"]) started.push(await startRole(role, env));

console.log(`Hopper        ${hopper.url}`);
console.log(`push vendor   ${vendor.url}/deliveries  (stand-in: slow, fails some requests)`);
console.log(`webhook       ${webhook.url}/deliveries`);
console.log(`\nChat: open ${api.url}/ in two windows (one private), sign in as alice and bob.`);
console.log(`Ops strip: ${api.url}/ops\n`);

/** Stops the workers first and Hopper last, so nothing loses its broker while it stops. */
async function stopAll(): Promise<void> {
  for (const child of started.reverse()) await child.stop();
}
process.once("SIGINT", () => {
  void stopAll().then(() => process.exit(0));
});
