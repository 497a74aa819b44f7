/**
 * The only source of randomness for semantics (retry jitter, lease tokens). Tests inject a seeded one
 * so that every run makes the same choices.
 */
import { randomBytes } from "node:crypto";

export interface Random {
  /** A float in [0, 1). */
  float(): number;
  /** An unsigned 48-bit integer, for tokens that must not repeat by accident. */
  uint48(): number;
}

export const systemRandom: Random = {
  float: () => randomBytes(6).readUIntBE(0, 6) / 2 ** 48,
  uint48: () => randomBytes(6).readUIntBE(0, 6),
};

/** A deterministic source (mulberry32), for tests and simulations. */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const next32 = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  return {
    float: () => next32() / 2 ** 32,
    uint48: () => (next32() & 0xffff) * 2 ** 32 + next32(),
  };
}
