/**
 * The Fastify application: JSON parsing, schema validation (TypeBox, no coercion of bodies, unknown
 * fields refused), authentication, the one error mapping, health and the OpenAPI document. Routes
 * live in their own files and only translate between the wire and the broker.
 */
import { isUtf8 } from "node:buffer";
import type { IncomingMessage } from "node:http";
import swagger from "@fastify/swagger";
import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from "fastify";
import type { TSchema } from "typebox";
import { Compile } from "typebox/compile";
import { Value } from "typebox/value";
import type { ApiKeys } from "../../auth/api-keys.js";
import { isDeviceUpgrade } from "../../auth/device-tokens.js";
import type { ExchangeBroker } from "../../broker/exchanges.js";
import type { InboxBroker } from "../../broker/inboxes.js";
import type { QueueBroker } from "../../broker/queues.js";
import type { StreamBroker } from "../../broker/streams.js";
import { HopperError } from "../../errors.js";
import { limits } from "../../limits.js";
import type { Metrics } from "../../observability/metrics.js";
import { describeErrors } from "../wire/validation-errors.js";
import { answerClientError } from "./client-errors.js";
import { registerExchangeRoutes } from "./exchange-routes.js";
import { registerInboxRoutes } from "./inbox-routes.js";
import { registerQueueRoutes } from "./queue-routes.js";
import { registerStreamRoutes } from "./stream-routes.js";

export interface HttpAppOptions {
  broker: QueueBroker;
  exchanges: ExchangeBroker;
  /** The inbox routes are served when it is given. */
  inboxes?: InboxBroker;
  /** The stream routes are served when it is given. */
  streams?: StreamBroker;
  apiKeys: ApiKeys;
  metrics: Metrics;
  logger: boolean | object;
}

declare module "fastify" {
  interface FastifyRequest {
    /** A JSON request's body as it came, before parsing. */
    bodyBytes: Buffer | undefined;
  }
}

/** Fastify's own errors that clients cause, mapped to catalog codes. */
const fastifyErrorCodes: Record<string, HopperError["code"]> = {
  FST_ERR_CTP_BODY_TOO_LARGE: "request_too_large",
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "unsupported_media_type",
  FST_ERR_CTP_INVALID_JSON_BODY: "invalid_json",
  FST_ERR_CTP_EMPTY_JSON_BODY: "invalid_json",
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: "invalid_request",
};

/** Router errors about the path: a bad percent-encoding, or a name too long even to match. */
const routerNameErrors = new Set(["FST_ERR_BAD_URL", "FST_ERR_MAX_PARAM_LENGTH"]);

const openPaths = new Set(["/healthz", "/readyz"]);

/** The Fastify app with its parsing, validation, errors, authentication and every route. */
export async function buildHttpApp(options: HttpAppOptions): Promise<FastifyInstance> {
  const app = Fastify({
    logger: options.logger,
    bodyLimit: limits.requestBytesMax,
    onProtoPoisoning: "error",
    onConstructorPoisoning: "error",
    keepAliveTimeout: limits.keepAliveMs,
    // A path parameter is matched percent-encoded, where one character may take three; the schema
    // then enforces the real name length, so an overlong name gets invalid_name, not a router 414.
    routerOptions: { maxParamLength: 3 * limits.nameLengthMax + 1 },
    // Errors the router raises before any route runs (a malformed URL, say) get the catalog's shape.
    frameworkErrors: (error, _request, reply) => {
      const hopperError = new HopperError(
        routerNameErrors.has(error.code) ? "invalid_name" : "invalid_request",
        error.message,
      );
      (reply as FastifyReply).status(hopperError.status).send({ error: hopperError.toJSON() });
    },
    // Requests Node's HTTP parser refuses, or that time out, never reach Fastify's router: without
    // this they would get Fastify's own body, not the catalog's.
    clientErrorHandler: answerClientError,
  });
  parseJsonBodies(app);
  validateWithSchemas(app);
  answerErrorsFromCatalog(app);
  requireApiKeys(app, options.apiKeys);

  await app.register(swagger, {
    openapi: {
      info: { title: "Hopper native API", version: "1" },
      components: { securitySchemes: { apiKey: { type: "http", scheme: "bearer" } } },
      security: [{ apiKey: [] }],
    },
  });

  registerOperationalRoutes(app, options);
  registerQueueRoutes(app, options.broker);
  registerExchangeRoutes(app, options.exchanges);
  if (options.inboxes) registerInboxRoutes(app, options.inboxes);
  if (options.streams) registerStreamRoutes(app, options.streams);
  return app;
}

/**
 * JSON is the only body the API takes (so text/plain gets 415). An empty body is allowed for calls
 * that take none (purge); anything else must be valid JSON. Its bytes stay on the request, so that a
 * send stores each JSON body as it was sent (decodeMessages).
 */
function parseJsonBodies(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser("error", "error");
  app.removeAllContentTypeParsers();
  app.decorateRequest("bodyBytes", undefined);
  app.addContentTypeParser("application/json", { parseAs: "buffer" }, (request, body, done) => {
    const bytes = body as Buffer;
    if (bytes.length === 0) return done(null, undefined);
    // JSON travels as UTF-8 (RFC 8259), and a body is stored as its bytes: bytes that are not UTF-8
    // would reach a consumer in a text frame its WebSocket must refuse.
    if (!isUtf8(bytes)) return done(new HopperError("invalid_json", "The body is not valid UTF-8."));
    request.bodyBytes = bytes;
    parseJson(request, bytes.toString("utf8"), done);
  });
}

/** Checks paths, query strings and bodies against the routes' TypeBox schemas, with catalog errors. */
function validateWithSchemas(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => {
    const validator = Compile(schema as TSchema);
    // A body whose every field is optional may be left out entirely (receive, create a queue).
    const bodyOptional =
      httpPart === "body" && ((schema as { required?: string[] }).required ?? []).length === 0;
    return (data: unknown) => {
      // Paths and query strings arrive as text; bodies are JSON and keep their types.
      let value = httpPart === "body" ? data : Value.Convert(schema as TSchema, data);
      // Fastify passes null for a request without a body.
      if (value == null && bodyOptional) value = {};
      if (validator.Check(value)) return { value };
      const raw = validator.Errors(value);
      const errors = describeErrors(raw);
      const first = errors[0];
      const code =
        httpPart === "params"
          ? "invalid_name"
          : raw.some(isOversizedBatch)
            ? "batch_too_large"
            : raw.some(isOverRecipients)
              ? "too_many_recipients"
              : "invalid_request";
      return {
        error: new HopperError(code, `Invalid ${httpPart}: ${first?.path} ${first?.message}`, { errors }),
      };
    };
  });
}

/** Maps every error, ours or Fastify's, to the catalog's shape; unknown routes are not_found. */
function answerErrorsFromCatalog(app: FastifyInstance): void {
  app.setErrorHandler((error: FastifyError | HopperError, request, reply) => {
    if (error instanceof HopperError) {
      const retryAfterMs = error.details?.retryAfterMs;
      if (typeof retryAfterMs === "number")
        reply.header("retry-after", String(Math.ceil(retryAfterMs / 1000)));
      return reply.status(error.status).send({ error: error.toJSON() });
    }
    const mapped = fastifyErrorCodes[error.code];
    if (mapped === "request_too_large") lingerOnOversizedBody(request.raw, reply);
    if (mapped) {
      const hopperError = fastifyClientError(mapped, error, request);
      return reply.status(hopperError.status).send({ error: hopperError.toJSON() });
    }
    if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
      return reply.status(400).send({ error: new HopperError("invalid_request", error.message).toJSON() });
    }
    request.log.error({ err: error }, "request failed");
    return reply.status(500).send({ error: new HopperError("internal").toJSON() });
  });

  app.setNotFoundHandler((request, reply) => {
    reply
      .status(404)
      .send({ error: new HopperError("not_found", `No route ${request.method} ${request.url}.`).toJSON() });
  });
}

/** Refuses requests without a valid API key, except to the health checks and device upgrades. */
function requireApiKeys(app: FastifyInstance, apiKeys: ApiKeys): void {
  app.addHook("onRequest", async (request) => {
    if (openPaths.has(request.url.split("?", 1)[0] as string)) return;
    // A device's upgrade carries a JWT instead, which the WebSocket endpoint verifies (from any address).
    if (isDeviceUpgrade(request.url)) return;
    const decision = apiKeys.decide(request.headers.authorization, request.socket.remoteAddress);
    if (decision === "unauthorized") throw new HopperError("unauthorized");
    if (decision === "forbidden") {
      throw new HopperError("forbidden", "No API keys are configured, so only loopback clients are served.");
    }
  });
}

/** Health, readiness, metrics and the OpenAPI document. */
function registerOperationalRoutes(app: FastifyInstance, options: HttpAppOptions): void {
  app.get("/healthz", { schema: { hide: true } }, async () => ({ status: "ok" }));
  app.get("/readyz", { schema: { hide: true } }, async (_request, reply) => {
    try {
      await options.broker.ready();
      return { status: "ready" };
    } catch (error) {
      return reply.status(503).send({ error: new HopperError("unavailable", String(error)).toJSON() });
    }
  });
  app.get("/metrics", { schema: { hide: true } }, async (_request, reply) => {
    reply.header("content-type", options.metrics.contentType);
    return options.metrics.render();
  });
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
}

/**
 * The catalog error for one of Fastify's own client errors: what the catalog's message says, with the
 * details docs/api.md promises, rather than Fastify's wording ("Unsupported Media Type").
 */
function fastifyClientError(
  code: HopperError["code"],
  error: FastifyError,
  request: FastifyRequest,
): HopperError {
  if (code === "request_too_large") {
    const bytesMax = limits.requestBytesMax;
    // A chunked upload declares no length, and is cut off at the limit: its size is not known.
    const bytes = Number(request.headers["content-length"]);
    return new HopperError("request_too_large", `The request body is larger than ${bytesMax} bytes.`, {
      ...(Number.isSafeInteger(bytes) && { bytes }),
      bytesMax,
    });
  }
  if (code === "unsupported_media_type") {
    const contentType = request.headers["content-type"];
    const sent =
      contentType === undefined ? "no Content-Type" : `Content-Type ${JSON.stringify(contentType)}`;
    return new HopperError(
      "unsupported_media_type",
      `The body has ${sent}; send JSON with Content-Type: application/json.`,
      { contentType: contentType ?? null },
    );
  }
  return new HopperError(code, error.message);
}

/** A batch (messages or receipts) with more items than a batch may hold. */
function isOversizedBatch(error: { keyword: string; instancePath: string }): boolean {
  return (
    error.keyword === "maxItems" && (error.instancePath === "/messages" || error.instancePath === "/receipts")
  );
}

/** An inbox append naming more recipients than one call takes (limits.inboxRecipientsMax). */
function isOverRecipients(error: { keyword: string; instancePath: string }): boolean {
  return error.keyword === "maxItems" && error.instancePath === "/recipients";
}

/**
 * A client still uploading an oversized body would get a reset (EPIPE) instead of the 413 if the
 * socket closed at once. So the rest of the body is read and discarded, up to a bound, and the
 * connection stays usable; past the bound the socket is destroyed.
 */
function lingerOnOversizedBody(raw: IncomingMessage, reply: FastifyReply): void {
  if (raw.complete) return;
  reply.removeHeader("connection");
  let discardedBytes = 0;
  raw.on("data", (chunk: Buffer) => {
    discardedBytes += chunk.length;
    if (discardedBytes > limits.oversizedBodyLingerBytesMax) raw.socket.destroy();
  });
  raw.resume();
}
