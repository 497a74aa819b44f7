import { seededRandom } from "../../random.js";
import { exerciseStore } from "../store-conformance.js";
import { LogStore } from "./log-store.js";

exerciseStore({
  name: "log (in memory)",
  create: async () => new LogStore({ random: seededRandom(7) }),
});
