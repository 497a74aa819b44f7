/**
 * How an exchange chooses destinations for a routing key (AMQP 0-9-1's rules):
 * - fanout: every binding, whatever the key;
 * - direct: bindings whose pattern equals the key;
 * - topic: keys and patterns are words separated by dots; in a pattern `*` matches exactly one word
 *   and `#` matches zero or more words.
 */

export type ExchangeType = "fanout" | "direct" | "topic";

/** Whether a topic pattern matches a routing key. Both are split on "."; empty words are words. */
export function topicMatches(pattern: string, routingKey: string): boolean {
  const words = pattern.split(".");
  const key = routingKey.split(".");
  // failed[p * (key.length + 1) + k] marks (pattern word p, key word k) positions already shown not to
  // match, so patterns with many `#`s cost at most patternWords × keyWords steps, not exponential time.
  const failed = new Uint8Array((words.length + 1) * (key.length + 1));
  const match = (p: number, k: number): boolean => {
    const state = p * (key.length + 1) + k;
    if (failed[state]) return false;
    let result: boolean;
    if (p === words.length) result = k === key.length;
    else if (words[p] === "#") result = match(p + 1, k) || (k < key.length && match(p, k + 1));
    else result = k < key.length && (words[p] === "*" || words[p] === key[k]) && match(p + 1, k + 1);
    if (!result) failed[state] = 1;
    return result;
  };
  return match(0, 0);
}

export function bindingMatches(type: ExchangeType, pattern: string, routingKey: string): boolean {
  switch (type) {
    case "fanout":
      return true;
    case "direct":
      return pattern === routingKey;
    case "topic":
      return topicMatches(pattern, routingKey);
  }
}
