/**
 * What the schema library writes into the document that readers and tools take for documentation
 * (issue 36 item 5), put right after generation:
 * - a filter's identifier and default message (`title: "maxLength(100)"`, `description: "a string at
 *   most 100 character(s) long"`) on every constrained field: `/docs` showed them as the field's
 *   meaning, and the constraint is already there as a keyword (`maxLength: 100`);
 * - `$id: "/schemas/unknown"` on every free-form value: 62 schemas sharing one `$id` make validators
 *   refuse the document's examples;
 * - paging's `limit` and a history's `days` typed as strings (the decoder reads text): the document
 *   says integer, so a generated client sends `limit: 10`.
 * And what an OpenAPI tool expects to find: `servers`, and the licence.
 */
const FILTER_TITLE =
  /^(maxLength|minLength|length|maxItems|minItems|itemsCount|between|lessThan|lessThanOrEqualTo|greaterThan|greaterThanOrEqualTo|positive|negative|nonNegative|nonPositive|int|finite|multipleOf|pattern|startsWith|endsWith|includes|trimmed|nonEmptyString)(\(.*\))?$/
const FILTER_DESCRIPTION =
  /^(a string( at (most|least) \d+ character\(s\) long| matching the pattern .*)?|an array of at (most|least) \d+ item\(s\)|a number (between|less than|greater than) .*|an? (positive|negative|non-negative|non-positive|finite) number|an integer)$/s

const tidySchema = (node: unknown): void => {
  if (node === null || typeof node !== "object") return
  if (Array.isArray(node)) return node.forEach(tidySchema)
  const o = node as Record<string, unknown>
  if (o.$id === "/schemas/unknown") {
    delete o.$id
    if (o.title === "unknown") delete o.title
  }
  if (typeof o.title === "string" && FILTER_TITLE.test(o.title)) delete o.title
  // a schema, or a parameter, whose description is only its filter's message (never an operation's or a field's own text)
  const describesConstraint = o.type !== undefined || o.anyOf !== undefined || o.items !== undefined || o.in !== undefined
  if (typeof o.description === "string" && FILTER_DESCRIPTION.test(o.description) && describesConstraint) {
    delete o.description
  }
  for (const value of Object.values(o)) tidySchema(value)
}

/** query parameters whose text is a whole number */
const INTEGER_PARAMS: Record<string, Record<string, unknown>> = {
  limit: { type: "integer", minimum: 1 },
  days: { type: "integer", minimum: 1, maximum: 90 }
}

export const tidyDocument = (spec: Record<string, any>, servers: ReadonlyArray<{ url: string; description?: string }>) => {
  spec.servers = servers
  // SPDX has no word for "not open": LicenseRef- is its form for a licence of one's own
  spec.info = { ...spec.info, license: { name: "Proprietary", identifier: "LicenseRef-Proprietary" } }
  for (const item of Object.values<Record<string, any>>(spec.paths ?? {})) {
    for (const op of Object.values<any>(item)) {
      for (const parameter of op?.parameters ?? []) {
        const integer = parameter.in === "query" ? INTEGER_PARAMS[parameter.name] : undefined
        if (integer !== undefined && parameter.schema?.type === "string") parameter.schema = { ...integer }
      }
      tidySchema(op)
    }
  }
  tidySchema(spec.components?.schemas)
  return spec
}
