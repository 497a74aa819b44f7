/** Human durations for the CLI: "250ms", "30s", "5m", "2h", "4d", or a bare number of milliseconds. */
const unitMs: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!match) throw new Error(`"${text}" is not a duration; use e.g. 500ms, 30s, 5m, 2h or 4d.`);
  const ms = Number(match[1]) * (unitMs[match[2] ?? "ms"] as number);
  if (!Number.isSafeInteger(Math.round(ms))) throw new Error(`"${text}" is too long.`);
  return Math.round(ms);
}

export function formatDuration(ms: number): string {
  for (const unit of ["d", "h", "m", "s"] as const) {
    const size = unitMs[unit] as number;
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
