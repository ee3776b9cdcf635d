/**
 * Request bodies that their handlers read and check by hand (breaches: Validate.ts; offline sync:
 * the 413 on the entry count comes before any entry is checked), so the platform must not decode
 * them: decoding would answer other codes and messages. These schemas describe the same shapes for
 * the document only (JSON Schema, through OpenApi.Override in Document.ts); the handlers stay the
 * judges of what is valid.
 */
import { JSONSchema, Schema } from "effect"

const Text = (max: number) => Schema.String.pipe(Schema.maxLength(max))
const Instant = Schema.String.annotations({ description: "ISO 8601 date-time with a zone, e.g. 2026-11-24T09:30:00Z; at most 5 minutes in the future" })
const PrincipalIds = Schema.Array(Text(200)).pipe(Schema.maxItems(10_000))
const Report = Schema.Struct({
  updatedDetails: Schema.optional(Schema.NullOr(Text(5000))),
  factsCircumstancesReasons: Schema.optional(Schema.NullOr(Text(5000))),
  mitigation: Schema.optional(Schema.NullOr(Text(5000))),
  causeFindings: Schema.optional(Schema.NullOr(Text(5000))),
  remedialMeasures: Schema.optional(Schema.NullOr(Text(5000)))
})

export const BreachRecordBody = Schema.Struct({
  description: Text(5000).pipe(Schema.minLength(1)),
  nature: Text(1000).pipe(Schema.minLength(1)),
  extent: Text(5000).pipe(Schema.minLength(1)),
  occurredAt: Schema.optional(Schema.NullOr(Instant)),
  awareAt: Schema.optional(Instant.annotations({ description: "when you became aware; defaults to now; the 72-hour deadline counts from it" })),
  location: Schema.optional(Schema.NullOr(Text(1000))),
  likelyImpact: Schema.optional(Schema.NullOr(Text(5000))),
  affectedDataPrincipalIds: Schema.optional(Schema.NullOr(PrincipalIds)),
  affectedCount: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.between(0, 2_147_483_647))),
  mitigation: Schema.optional(Schema.NullOr(Text(5000)))
}).annotations({ description: "Unknown fields are refused (400 BAD_REQUEST)." })

export const BreachUpdateBody = Schema.Struct({
  status: Schema.optional(Schema.Literal("initial_intimated", "reported", "closed").annotations({
    description: "one step forward only: open → initial_intimated → reported → closed"
  })),
  detailedReport: Schema.optional(Report),
  boardInitialIntimationSentAt: Schema.optional(Instant),
  boardDetailedReportSentAt: Schema.optional(Instant),
  extension: Schema.optional(Schema.Struct({
    requestedAt: Schema.optional(Instant),
    granted: Schema.optional(Schema.NullOr(Schema.Boolean)),
    newDueAt: Schema.optional(Schema.NullOr(Instant))
  }))
}).annotations({ description: "Unknown fields are refused (400 BAD_REQUEST)." })

export const IntimationBody = Schema.Struct({
  dataPrincipalIds: PrincipalIds.pipe(Schema.minItems(1)),
  channel: Text(100).pipe(Schema.minLength(1)),
  contentIncluded: Schema.Array(Schema.Literal("description", "likely_consequences", "mitigation", "safety_measures", "contact")),
  intimatedAt: Schema.optional(Instant)
})

export const SignedAuditEntry = Schema.Struct({
  seq: Schema.Number.pipe(Schema.int(), Schema.positive()),
  timestamp: Schema.String,
  action: Text(200).annotations({ description: "a dotted identifier, e.g. email.read" }),
  agentDID: Schema.String,
  grantId: Schema.String,
  scopes: Schema.Array(Schema.String),
  result: Schema.Literal("success", "auth_failure", "scope_violation", "execution_error"),
  metadata: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({ description: "at most 16 KiB of JSON" })),
  prevHash: Schema.String.annotations({ description: "the previous entry's hash; 0000000000000000 for the first" }),
  hash: Schema.String,
  signature: Schema.String.annotations({ description: "hex Ed25519 signature over `hash` with the bundle's offline audit key" })
})

export const OfflineSyncBody = Schema.Struct({
  bundleId: Schema.String,
  entries: Schema.Array(SignedAuditEntry).annotations({ description: "at most 1000 (more: 413 PAYLOAD_TOO_LARGE)" })
})

/** the JSON Schema of `schema`, inline (no $schema, no $defs: these shapes have no recursion) */
export const jsonSchemaOf = (schema: Schema.Schema<any, any>): Record<string, unknown> => {
  const { $schema: _, ...rest } = JSONSchema.make(schema) as unknown as Record<string, unknown>
  return rest
}
