/**
 * The statements on exchanges and their bindings.
 */
/** An exchange with its bindings as a JSON array, in a stable order. */
const exchangeWithBindings = `
  SELECT e.exchange_id, e.name, e.type, e.alternate, e.created_at,
    coalesce(
      (SELECT json_agg(json_build_object('kind', b.destination_kind, 'name', b.destination, 'pattern', b.pattern)
         ORDER BY b.destination_kind, b.destination, b.pattern)
       FROM bindings b WHERE b.exchange_id = e.exchange_id),
      '[]') AS bindings
  FROM exchanges e`;

/** $1 name. Returns: the exchange with its bindings, or no row. */
export const exchangeSelectByName = `${exchangeWithBindings} WHERE e.name = $1`;

/** Returns: every exchange with its bindings, by name. */
export const exchangeSelectAll = `${exchangeWithBindings} ORDER BY e.name`;

/** $1 name. Returns: { exchange_id, type } locked against deletion until commit. */
export const exchangeLockShared = `SELECT exchange_id, type FROM exchanges WHERE name = $1 FOR KEY SHARE`;

/** $1 name. Returns: { exchange_id, type } locked for update (upsert and delete). */
export const exchangeLockExclusive = `SELECT exchange_id, type FROM exchanges WHERE name = $1 FOR UPDATE`;

/** $1 name, $2 type, $3 alternate, $4 createdAt. Returns: { exchange_id }, or no row if the name was
 * taken by a concurrent create. */
export const exchangeInsert = `
  INSERT INTO exchanges (name, type, alternate, created_at) VALUES ($1, $2, $3, $4)
  ON CONFLICT (name) DO NOTHING RETURNING exchange_id`;

/** $1 exchangeId, $2 alternate. */
export const exchangeUpdateAlternate = `UPDATE exchanges SET alternate = $2 WHERE exchange_id = $1`;

/** $1 exchangeId. Deletes the exchange; its own bindings go by cascade. */
export const exchangeDelete = `DELETE FROM exchanges WHERE exchange_id = $1`;

/** $1 exchangeId, $2 destinationKind, $3 destination, $4 pattern. Returns: rowCount 1 if new. */
export const bindingInsert = `
  INSERT INTO bindings (exchange_id, destination_kind, destination, pattern) VALUES ($1, $2, $3, $4)
  ON CONFLICT DO NOTHING`;

/** $1 exchangeId, $2 destinationKind, $3 destination, $4 pattern. Returns: rowCount 1 if it existed. */
export const bindingDelete = `
  DELETE FROM bindings WHERE exchange_id = $1 AND destination_kind = $2 AND destination = $3 AND pattern = $4`;

/** $1 destinationKind, $2 destination. Deletes every binding to a queue or exchange being deleted. */
export const bindingDeleteByDestination = `DELETE FROM bindings WHERE destination_kind = $1 AND destination = $2`;
