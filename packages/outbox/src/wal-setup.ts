/**
 * The WAL mode's server side: the publication of the outbox table's inserts and the logical
 * replication slot (pgoutput) the relay reads, created if missing. They must exist before the
 * application writes its first WAL-mode event, since the table keeps nothing: an insert-and-delete
 * committed before the slot existed is in no slot's WAL. So `migrate(db, { wal: … })` creates them,
 * and the relay checks them again at start. The insert trigger's NOTIFY is turned off: nothing
 * listens for it in WAL mode.
 */
import type { Pool } from "pg";
import { isPgPool, type OutboxDatabase } from "./driver.js";
import { walQueries } from "./postgres-queries.js";
import {
  resolveTables,
  resolveWalNames,
  type TableOptions,
  type WalNames,
  type WalOptions,
} from "./tables.js";

export interface WalSetup extends WalNames {
  /** What this call created: "publication", "slot". */
  created: string[];
  /** The server's max_slot_wal_keep_size ("-1" is unlimited). */
  maxSlotWalKeepSize: string;
  /** Set when max_slot_wal_keep_size is unlimited: a relay blocked for long would keep WAL until
   * the disk fills. */
  warning: string | undefined;
}

type Queryable = Pick<Pool, "query">;

export async function setUpWal(
  db: OutboxDatabase,
  options: TableOptions & WalOptions = {},
): Promise<WalSetup> {
  if (!isPgPool(db) && typeof (db as Queryable).query !== "function") {
    throw new TypeError("the WAL mode needs PostgreSQL (a pg Pool)");
  }
  const client = db as Queryable;
  const tables = resolveTables(options, "postgres");
  const names = resolveWalNames(tables, options);
  const q = walQueries(tables, names);
  const settings = (await client.query(q.walSettings)).rows[0] as {
    wal_level: string;
    max_slot_wal_keep_size: string;
  };
  if (settings.wal_level !== "logical") {
    throw new Error(
      `the WAL mode needs wal_level=logical, and this server has ${settings.wal_level}: set it in postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart PostgreSQL`,
    );
  }
  const created: string[] = [];
  if ((await client.query(q.walPublicationFind)).rowCount === 0) {
    // Two setups racing: the loser's CREATE fails with a duplicate, and the publication exists.
    await client.query(q.walPublicationCreate).catch(async (error) => {
      if ((await client.query(q.walPublicationFind)).rowCount === 0) throw error;
    });
    created.push("publication");
  }
  // Only when on: the ALTER locks the table against writers and needs its owner, and the relay
  // calls this at every start.
  if ((await client.query(q.walNotifyState)).rows[0]?.tgenabled === "O") await client.query(q.walNotifyOff);
  const database = (await client.query(q.walDatabase)).rows[0].database as string;
  const slot = (await client.query(q.walSlotFind)).rows[0] as
    | { plugin: string; database: string }
    | undefined;
  if (slot === undefined) {
    await client.query(q.walSlotCreate).catch(async (error) => {
      if ((await client.query(q.walSlotFind)).rowCount === 0) throw error;
    });
    created.push("slot");
  } else if (slot.plugin !== "pgoutput" || slot.database !== database) {
    throw new Error(
      `replication slot ${names.slot} exists for ${slot.plugin} in database ${slot.database}: name another slot (slotName)`,
    );
  }
  const unlimited = settings.max_slot_wal_keep_size === "-1";
  return {
    ...names,
    created,
    maxSlotWalKeepSize: settings.max_slot_wal_keep_size,
    warning: unlimited
      ? "max_slot_wal_keep_size is -1 (unlimited): a relay that cannot publish keeps WAL on the database server until its disk fills; set a bound (ALTER SYSTEM SET max_slot_wal_keep_size = '10GB'; SELECT pg_reload_conf()), see docs/outbox.md"
      : undefined,
  };
}
