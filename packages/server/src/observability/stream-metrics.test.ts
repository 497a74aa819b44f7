/**
 * The stream families of a scrape: appended records and bytes per stream, a consumer group's lag per
 * partition, and the records share groups dead-lettered, each matching what was done.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ExchangeBroker } from "../broker/exchanges.js";
import { QueueBroker } from "../broker/queues.js";
import { StreamBroker } from "../broker/streams.js";
import { FakeClock } from "../clock.js";
import { seededRandom } from "../random.js";
import { SqliteStore } from "../store/sqlite/sqlite-store.js";
import { Metrics } from "./metrics.js";

const silent = { info: () => {}, warn: () => {}, error: () => {} };

test("a scrape reports appended records and bytes, group lag per partition, and share dead letters", async () => {
  const store = new SqliteStore({ path: ":memory:", random: seededRandom(5) });
  const clock = new FakeClock();
  const broker = new QueueBroker(store, clock, seededRandom(3), silent);
  await broker.start();
  const streams = new StreamBroker(store, clock, silent, broker.router);
  try {
    const metrics = new Metrics(
      broker,
      new ExchangeBroker(store, clock, broker.router, broker, streams),
      store,
      undefined,
      streams,
    );
    await broker.putQueue("dlq", {});
    await streams.putStream("orders", { partitions: 2 });
    await streams.append("orders", [
      { partition: 0, body: "abc" },
      { partition: 0, body: "de" },
      { partition: 1, body: "f" },
    ]);
    const { generation } = await streams.groups.fetch("orders", "billing", "m", { max: 1 });
    await streams.groups.commit("orders", "billing", "m", generation, [{ partition: 0, offset: 1 }]);
    await streams.shares.putShare("orders", "pool", { deadLetter: { queue: "dlq", maxDeliveries: 1 } });
    const [record] = await streams.shares.receive("orders", "pool", {});
    await streams.shares.nack("orders", "pool", [record?.receipt as string]);
    const text = await metrics.render();
    const lines = text.split("\n").filter((line) => line.startsWith("hopper_stream_"));
    for (const expected of [
      'hopper_stream_records_total{stream="orders",event="appended"} 3',
      // JSON bodies, stored as their text: "abc", "de", "f" are 5 + 4 + 3 bytes.
      'hopper_stream_appended_bytes_total{stream="orders"} 12',
      'hopper_stream_records{stream="orders",partition="1"} 1',
      'hopper_stream_group_lag{stream="orders",group="billing",partition="0"} 1',
      'hopper_stream_group_lag{stream="orders",group="billing",partition="1"} 1',
      'hopper_stream_share_dead_lettered_total{stream="orders"} 1',
    ])
      assert.ok(lines.includes(expected), `${expected} in:\n${lines.join("\n")}`);
  } finally {
    broker.stop();
    await store.close();
  }
});
