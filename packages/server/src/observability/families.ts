/**
 * A metric family written as Prometheus text directly (the per-queue, per-namespace and per-stream
 * families of /metrics, metrics.ts says why): its header, then one line per series.
 */
import type { Histogram } from "../broker/inbox-stats.js";

/** A family of per-queue series: its header, then one line per series as the pages come. */
export class Family {
  private readonly lines: string[];

  constructor(
    readonly name: string,
    help: string,
    type: "counter" | "gauge" | "histogram",
  ) {
    this.lines = [`# HELP ${name} ${escapeHelp(help)}`, `# TYPE ${name} ${type}`];
  }

  add(labels: string, value: number): void {
    this.lines.push(`${this.name}{${labels}} ${value}`);
  }

  /** A histogram's series for one label set: cumulative buckets, +Inf, sum and count. */
  addHistogram(labels: string, histogram: Histogram): void {
    for (const [bound, count] of histogram.cumulative()) {
      this.lines.push(`${this.name}_bucket{${labels},le="${bound}"} ${count}`);
    }
    this.lines.push(`${this.name}_bucket{${labels},le="+Inf"} ${histogram.count}`);
    this.lines.push(`${this.name}_sum{${labels}} ${histogram.sum}`);
    this.lines.push(`${this.name}_count{${labels}} ${histogram.count}`);
  }

  text(): string {
    return `${this.lines.join("\n")}\n`;
  }
}

/** As the exposition format escapes: a backslash and a line feed in help text. */
function escapeHelp(help: string): string {
  return help.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/** As the exposition format escapes a label value: backslash, double quote, line feed. */
export function labelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}
