/**
 * Device authentication with JWTs issued by the application (DESIGN.md §6 "Edge access", API.md
 * "WebSocket"): a browser or phone connects to `/v1/ws?token=<JWT>`, and the token alone says who it is
 * (`sub`, the recipient) and what it may use (the `hopper` claim). Tokens are verified with `jose`: HS256
 * with a shared secret, or RS256/ES256 with a key set (JWKS) the application publishes. `exp` is required
 * and checked on the injected clock, so tests drive expiry without sleeping.
 */
import { readFileSync } from "node:fs";
import { createLocalJWKSet, type JSONWebKeySet, errors as joseErrors, jwtVerify } from "jose";
import { topicMatches } from "../broker/routing.js";
import { HopperError } from "../errors.js";
import { limits } from "../limits.js";

/** What a verified device token grants. */
export interface DeviceClaims {
  /** The token's `sub`: whose inbox the device reads. */
  recipient: string;
  /** Namespaces whose inbox of `recipient` it may read and ack. */
  inboxes: readonly string[];
  /** Signal channel patterns it may subscribe and publish on (`*` one word, `#` any, as topic exchanges). */
  signals: readonly string[];
  /** When the token ends (its `exp`), in milliseconds since the epoch. */
  expiresAtMs: number;
}

/** The algorithms each kind of key takes: a secret signs HS256 only, a key set RS256 or ES256. */
const secretAlgorithms = ["HS256"];
const keySetAlgorithms = ["RS256", "ES256"];

type VerifyKey = Parameters<typeof jwtVerify>[1];

export class DeviceTokens {
  private constructor(
    private readonly key: VerifyKey,
    private readonly algorithms: string[],
  ) {}

  /** Tokens signed HS256 with `secret` (`--jwt-secret`, HOPPER_JWT_SECRET). */
  static fromSecret(secret: string): DeviceTokens {
    const bytes = new TextEncoder().encode(secret);
    if (bytes.length < limits.jwtSecretBytesMin) {
      throw new Error(
        `the JWT secret must be at least ${limits.jwtSecretBytesMin} bytes (it is ${bytes.length}).`,
      );
    }
    return new DeviceTokens(bytes, secretAlgorithms);
  }

  /** Tokens signed RS256 or ES256 by a key of the set (`--jwt-jwks <file>`, a JWKS JSON document). */
  static fromKeySet(keySet: JSONWebKeySet): DeviceTokens {
    if (!Array.isArray(keySet?.keys) || keySet.keys.length === 0) {
      throw new Error('a JWKS is a JSON object with a non-empty "keys" array.');
    }
    return new DeviceTokens(createLocalJWKSet(keySet) as unknown as VerifyKey, keySetAlgorithms);
  }

  static fromKeySetFile(path: string): DeviceTokens {
    let keySet: JSONWebKeySet;
    try {
      keySet = JSON.parse(readFileSync(path, "utf8")) as JSONWebKeySet;
    } catch (error) {
      throw new Error(`--jwt-jwks ${path}: ${(error as Error).message}`);
    }
    return DeviceTokens.fromKeySet(keySet);
  }

  /**
   * The claims of a valid token, checked at `nowMs`; anything else (a bad signature, another algorithm,
   * no `exp` or an `exp` past, no `sub`, a malformed `hopper` claim) throws `unauthorized`.
   */
  async verify(token: string, nowMs: number): Promise<DeviceClaims> {
    let payload: Record<string, unknown>;
    try {
      const verified = await jwtVerify(token, this.key, {
        algorithms: this.algorithms,
        requiredClaims: ["exp", "sub"],
        currentDate: new Date(nowMs),
      });
      payload = verified.payload as Record<string, unknown>;
    } catch (error) {
      throw new HopperError("unauthorized", `The device token is not valid: ${tokenProblem(error)}.`);
    }
    const recipient = payload.sub;
    if (typeof recipient !== "string" || !new RegExp(limits.namePattern).test(recipient)) {
      throw new HopperError("unauthorized", "The device token's sub is not a recipient name.");
    }
    const grants = (payload.hopper ?? {}) as Record<string, unknown>;
    return {
      recipient,
      inboxes: stringList(grants.inboxes, "inboxes"),
      signals: stringList(grants.signals, "signals"),
      expiresAtMs: (payload.exp as number) * 1000,
    };
  }
}

/** The `token` of a `/v1/ws?token=` URL, or undefined when it has none. */
export function deviceTokenOf(url: string): string | undefined {
  const query = url.indexOf("?");
  if (query === -1) return undefined;
  return new URLSearchParams(url.slice(query + 1)).get("token") ?? undefined;
}

/**
 * Whether a request is a device's WebSocket upgrade, authenticated by its token alone: the app's API-key
 * hook leaves these to the WebSocket endpoint, which refuses them unless the token verifies.
 */
export function isDeviceUpgrade(url: string): boolean {
  return url.split("?", 1)[0] === "/v1/ws" && deviceTokenOf(url) !== undefined;
}

/** Whether a device with these claims may use the signal channel. */
export function signalChannelAllowed(claims: DeviceClaims, channel: string): boolean {
  return claims.signals.some((pattern) => topicMatches(pattern, channel));
}

function stringList(value: unknown, name: string): string[] {
  if (value === undefined) return [];
  if (
    !Array.isArray(value) ||
    value.length > limits.jwtClaimListMax ||
    !value.every((item) => typeof item === "string" && item.length > 0 && item.length <= limits.nameLengthMax)
  ) {
    throw new HopperError(
      "unauthorized",
      `The device token's hopper.${name} is not a list of at most ${limits.jwtClaimListMax} names.`,
    );
  }
  return value as string[];
}

/** Says why jose refused a token, without echoing the token. */
function tokenProblem(error: unknown): string {
  if (error instanceof joseErrors.JWTExpired) return "it has expired";
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return "its signature does not verify";
  if (error instanceof joseErrors.JWTClaimValidationFailed)
    return `its ${error.claim} claim is missing or wrong`;
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return "it is signed with an algorithm not accepted";
  if (error instanceof joseErrors.JWKSNoMatchingKey) return "no key of the key set matches it";
  return "it is not a well-formed JWT";
}
