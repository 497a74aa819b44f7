/**
 * Where the outbox's tables live in the application's database: a schema (PostgreSQL) and a prefix the
 * application chooses, checked once so that every statement may quote them safely. The same
 * `TableOptions` must be given to migrate, writeOutbox, runRelay and processOnce.
 */
import { outboxLimits } from "./limits.js";

export interface TableOptions {
  /** PostgreSQL only: the schema of the tables, created by migrate if missing. Default `public`. */
  schema?: string;
  /** Prefix of every table name. Default `hopper_`: tables `hopper_outbox`, `hopper_processed`, … */
  prefix?: string;
}

/** Fully qualified, quoted table names, and the NOTIFY channel of new rows. */
export interface Tables {
  readonly schema: string | undefined;
  readonly prefix: string;
  readonly outbox: string;
  readonly outboxFailed: string;
  readonly processed: string;
  readonly migrations: string;
  /** The NOTIFY channel, unquoted (`pg_notify` takes it as text). */
  readonly channel: string;
  /** A name for index `suffix`, unqualified (an index lives in its table's schema). */
  index(suffix: string): string;
}

const identifierPattern = /^[a-z_][a-z0-9_]*$/;
const prefixPattern = /^[a-z_][a-z0-9_]*$|^$/;

export function resolveTables(options: TableOptions = {}, dialect: "postgres" | "sqlite"): Tables {
  const prefix = options.prefix ?? "hopper_";
  if (!prefixPattern.test(prefix) || prefix.length > outboxLimits.prefixLengthMax) {
    throw new TypeError(
      `outbox table prefix ${JSON.stringify(prefix)}: lower-case letters, digits and _, at most ${outboxLimits.prefixLengthMax}`,
    );
  }
  let schema: string | undefined;
  if (dialect === "postgres") {
    schema = options.schema ?? "public";
    if (!identifierPattern.test(schema) || schema.length > outboxLimits.schemaLengthMax) {
      throw new TypeError(`outbox schema ${JSON.stringify(schema)}: lower-case letters, digits and _`);
    }
  } else if (options.schema !== undefined) {
    throw new TypeError("a SQLite outbox has no schema: use a prefix");
  }
  const qualify = (name: string) => (schema === undefined ? `"${name}"` : `"${schema}"."${name}"`);
  return {
    schema,
    prefix,
    outbox: qualify(`${prefix}outbox`),
    outboxFailed: qualify(`${prefix}outbox_failed`),
    processed: qualify(`${prefix}processed`),
    migrations: qualify(`${prefix}outbox_migrations`),
    channel: `${schema ?? "main"}.${prefix}outbox`.slice(0, 63),
    index: (suffix) => `"${prefix}${suffix}"`,
  };
}

/** The WAL mode's replication slot and publication (PostgreSQL). */
export interface WalOptions {
  /** The replication slot. Slots are per cluster: name it when several databases of one cluster
   * run a WAL outbox. Default `<prefix>outbox_<schema>`. */
  slotName?: string;
  /** The publication of the outbox table's inserts. Default `<prefix>outbox_<schema>`. */
  publicationName?: string;
}

export interface WalNames {
  readonly slot: string;
  readonly publication: string;
}

export function resolveWalNames(tables: Tables, options: WalOptions = {}): WalNames {
  const fallback = `${tables.prefix}outbox_${tables.schema}`.slice(0, outboxLimits.walNameLengthMax);
  const names = { slot: options.slotName ?? fallback, publication: options.publicationName ?? fallback };
  for (const [what, name] of Object.entries(names)) {
    if (!identifierPattern.test(name) || name.length > outboxLimits.walNameLengthMax) {
      throw new TypeError(
        `outbox ${what} name ${JSON.stringify(name)}: lower-case letters, digits and _, at most ${outboxLimits.walNameLengthMax}`,
      );
    }
  }
  return names;
}
