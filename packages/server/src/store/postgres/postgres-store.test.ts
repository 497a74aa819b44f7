/**
 * The conformance suite against PostgreSQL. It needs a server: HOPPER_TEST_PG_URL names it (CI sets
 * it); without it these tests are skipped and say why. Each store gets a schema of its own, dropped
 * afterwards, so runs never see each other's rows.
 */
import { after, test } from "node:test";
import pg from "pg";
import { seededRandom } from "../../random.js";
import { exerciseStore } from "../../testing/store-conformance/index.js";
import { PostgresStore } from "./postgres-store.js";

const url = process.env.HOPPER_TEST_PG_URL;
const schemas: string[] = [];
let nextSchema = 0;

async function dropSchemas(): Promise<void> {
  if (!url || schemas.length === 0) return;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const schema of schemas.splice(0)) await client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  } finally {
    await client.end();
  }
}

if (url) {
  exerciseStore({
    name: "postgres",
    create: async () => {
      const schema = `hopper_test_${process.pid}_${nextSchema++}`;
      schemas.push(schema);
      return PostgresStore.open({ url, schema, random: seededRandom(nextSchema), poolSize: 4 });
    },
  });
  after(dropSchemas);
} else {
  test("postgres store conformance", {
    skip: "HOPPER_TEST_PG_URL is not set: no PostgreSQL to test against",
  }, () => {});
}
