/** How every protocol adapter reports a schema violation: short `{ path, message }` pairs. */
import { limits } from "../../limits.js";

export interface SchemaViolation {
  keyword: string;
  instancePath: string;
  message: string;
  params: unknown;
}

/**
 * Turns TypeBox's errors into at most schemaViolationsListedMax `{ path, message }` pairs, naming
 * unknown fields plainly.
 */
export function describeErrors(errors: SchemaViolation[]): { path: string; message: string }[] {
  return errors
    .filter((e) => e.keyword !== "boolean")
    .slice(0, limits.schemaViolationsListedMax)
    .map((e) => {
      const unknown = (e.params as { additionalProperties?: string[] }).additionalProperties;
      const message =
        e.keyword === "additionalProperties" && unknown
          ? `has unknown field(s): ${unknown.join(", ")}`
          : e.message;
      return { path: e.instancePath || "/", message };
    });
}
