/**
 * The exchange routes of API.md: each validates (by schema), makes one broker call and renders the
 * answer. No semantics live here.
 */
import { BindingBody, ExchangeParams, PublishBody, PutExchangeBody } from "@hopper/wire";
import type { FastifyInstance } from "fastify";
import type { ExchangeBroker } from "../../broker/exchanges.js";
import type { OutgoingMessage } from "../../broker/queues.js";
import { HopperError } from "../../errors.js";
import type { BindingDestination } from "../../model/exchange.js";
import { decodeMessages } from "../wire/messages.js";
import { renderExchange, renderItemResult } from "../wire/render.js";

type ExchangePath = { exchange: string };

/** A binding names exactly one destination. */
function destinationOf(body: BindingBody): BindingDestination {
  const given = [body.queue, body.exchange, body.stream].filter((name) => name !== undefined);
  if (given.length !== 1)
    throw new HopperError("invalid_request", "A binding names one of queue, exchange or stream.");
  if (body.queue !== undefined) return { kind: "queue", name: body.queue };
  if (body.stream !== undefined) return { kind: "stream", name: body.stream };
  return { kind: "exchange", name: body.exchange as string };
}

export function registerExchangeRoutes(app: FastifyInstance, exchanges: ExchangeBroker): void {
  const tags = ["exchanges"];
  const unroutable = (name: string) => exchanges.unroutable.get(name) ?? 0;

  app.put<{ Params: ExchangePath; Body: PutExchangeBody }>(
    "/v1/exchanges/:exchange",
    { schema: { tags, params: ExchangeParams, body: PutExchangeBody } },
    async (request, reply) => {
      const { created, exchange } = await exchanges.putExchange(request.params.exchange, request.body);
      return reply.status(created ? 201 : 200).send(renderExchange(exchange, unroutable(exchange.name)));
    },
  );

  app.get("/v1/exchanges", { schema: { tags } }, async () => ({
    exchanges: (await exchanges.listExchanges()).map((exchange) =>
      renderExchange(exchange, unroutable(exchange.name)),
    ),
  }));

  app.get<{ Params: ExchangePath }>(
    "/v1/exchanges/:exchange",
    { schema: { tags, params: ExchangeParams } },
    async (request) => {
      const exchange = await exchanges.getExchange(request.params.exchange);
      return renderExchange(exchange, unroutable(exchange.name));
    },
  );

  app.delete<{ Params: ExchangePath }>(
    "/v1/exchanges/:exchange",
    { schema: { tags, params: ExchangeParams } },
    async (request, reply) => {
      await exchanges.deleteExchange(request.params.exchange);
      return reply.status(204).send();
    },
  );

  app.put<{ Params: ExchangePath; Body: BindingBody }>(
    "/v1/exchanges/:exchange/bindings",
    { schema: { tags, params: ExchangeParams, body: BindingBody } },
    async (request, reply) => {
      const { created } = await exchanges.bind(
        request.params.exchange,
        destinationOf(request.body),
        request.body.pattern,
      );
      return reply.status(created ? 201 : 200).send({ created });
    },
  );

  app.delete<{ Params: ExchangePath; Body: BindingBody }>(
    "/v1/exchanges/:exchange/bindings",
    { schema: { tags, params: ExchangeParams, body: BindingBody } },
    async (request, reply) => {
      await exchanges.unbind(request.params.exchange, destinationOf(request.body), request.body.pattern);
      return reply.status(204).send();
    },
  );

  app.post<{ Params: ExchangePath; Body: PublishBody }>(
    "/v1/exchanges/:exchange/publish",
    { schema: { tags, params: ExchangeParams, body: PublishBody } },
    async (request) => {
      const { messages } = request.body;
      const decoded = decodeMessages(messages, request.bodyBytes);
      const items = messages.map(({ routingKey }, index) => ({
        routingKey,
        message: decoded[index] as OutgoingMessage,
      }));
      const results = await exchanges.publish(
        request.params.exchange,
        items,
        request.body.mandatory ?? false,
      );
      return { results: results.map(renderItemResult) };
    },
  );
}
