/**
 * @hopper/wire: the contract of Hopper's native API, as TypeBox schemas with a type of the same name
 * for each. The server validates requests with them and the client's types are derived from them, so
 * the two cannot drift apart. `wireLimits` (also at `@hopper/wire/limits`, which needs no TypeBox)
 * holds the bounds they enforce.
 */
export { wireLimits } from "./limits.js";
export * from "./requests.js";
export * from "./responses.js";
export * from "./streams.js";
