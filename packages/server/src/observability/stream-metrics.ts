/**
 * The stream families of /metrics: per stream the records and bytes appended and removed by retention
 * (the store's counters, shared by every node), per consumer group and partition the lag, and per
 * stream the records its share groups dead-lettered through this node since it started.
 */
import type { StreamBroker } from "../broker/streams.js";
import { Family, labelValue } from "./families.js";

export async function renderStreams(streams: StreamBroker): Promise<string> {
  const records = new Family(
    "hopper_stream_records_total",
    "Stream records per stream and event (appended, expired, duplicates) since it was created.",
    "counter",
  );
  const bytes = new Family(
    "hopper_stream_appended_bytes_total",
    "Bytes of record bodies appended per stream.",
    "counter",
  );
  const held = new Family("hopper_stream_records", "Records retained per stream and partition.", "gauge");
  const lag = new Family(
    "hopper_stream_group_lag",
    "Records of a partition past its consumer group's committed offset.",
    "gauge",
  );
  const deadLettered = new Family(
    "hopper_stream_share_dead_lettered_total",
    "Records that share groups of the stream copied to their dead-letter queue through this node since it started.",
    "counter",
  );
  for (const stream of await streams.listStreams()) {
    const label = `stream="${labelValue(stream.name)}"`;
    records.add(`${label},event="appended"`, stream.counters.appended);
    records.add(`${label},event="expired"`, stream.counters.expired);
    records.add(`${label},event="duplicates"`, stream.counters.duplicates);
    bytes.add(label, stream.counters.appendedBytes);
    for (const partition of stream.partitions)
      held.add(`${label},partition="${partition.partition}"`, partition.records);
    const groups = await streams.groups.listGroups(stream.name).catch(() => []);
    for (const group of groups) {
      for (const partition of group.partitions)
        lag.add(
          `${label},group="${labelValue(group.name)}",partition="${partition.partition}"`,
          partition.lag,
        );
    }
    deadLettered.add(label, streams.shares.deadLettered.get(stream.name) ?? 0);
  }
  return [records, bytes, held, lag, deadLettered].map((family) => family.text()).join("\n");
}
