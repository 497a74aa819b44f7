/**
 * What it costs this machine to give a process a page of memory it has not touched yet: one byte
 * written per 4 KiB page of a fresh 256 MiB buffer (allocated outside the heap, so the C library maps
 * it fresh), timed, over three rounds. Every megabyte by which a server's resident memory grows costs
 * 256 of these, so the figure says what growing to a high-water mark costs (10.7 µs a page on the
 * benchmark VM, about fifty times a bare machine's: bench/results/2026-12-01-session-13.md).
 *
 *   node bench/dist/probes/page-fault-probe.js [--mib 256] [--rounds 3]
 */
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";

const pageBytes = 4096;
const { values } = parseArgs({
  options: { mib: { type: "string", default: "256" }, rounds: { type: "string", default: "3" } },
});
const mib = Number(values.mib);
const rounds = Number(values.rounds);
if (!Number.isInteger(mib) || mib < 1 || mib > 4096) throw new Error("--mib: an integer from 1 to 4096");
if (!Number.isInteger(rounds) || rounds < 1) throw new Error("--rounds: a positive integer");

for (let round = 1; round <= rounds; round++) {
  // Not filled: allocUnsafeSlow leaves the pages untouched until the loop below writes them.
  const buffer = Buffer.allocUnsafeSlow(mib * 1024 * 1024);
  const startedAt = performance.now();
  for (let at = 0; at < buffer.length; at += pageBytes) buffer[at] = 1;
  const elapsedMs = performance.now() - startedAt;
  const pages = buffer.length / pageBytes;
  console.log(
    `round ${round}: ${pages} pages touched in ${elapsedMs.toFixed(1)} ms, ` +
      `${((elapsedMs * 1000) / pages).toFixed(2)} µs a page`,
  );
}
