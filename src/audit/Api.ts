/** The main audit log: one hash chain per developer (decisions §3). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, NotFound } from "../platform/Errors.ts"
import { BoundedMetadata } from "../platform/Metadata.ts"
import { documented } from "../platform/OperationDocs.ts"
import { AUDIT_DOCS } from "./Docs.ts"

export const AuditEntryView = Schema.Struct({
  entryId: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  agentDid: Schema.NullOr(Schema.String),
  grantId: Schema.NullOr(Schema.String),
  principalId: Schema.NullOr(Schema.String),
  developerId: Schema.String,
  action: Schema.String,
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  hash: Schema.String,
  prevHash: Schema.NullOr(Schema.String),
  timestamp: Schema.String,
  status: Schema.String,
  // decisions §21: hash version 2 (salted digests of the principal and metadata); piiSalt null once erased
  hashVersion: Schema.optional(Schema.Number),
  piiSalt: Schema.optional(Schema.NullOr(Schema.String)),
  principalDigest: Schema.optional(Schema.NullOr(Schema.String)),
  metadataDigest: Schema.optional(Schema.NullOr(Schema.String)),
  erased: Schema.optional(Schema.Boolean)
})

const Text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

/** decisions §3: any non-empty string of at most 200 characters without control characters (C0, DEL, C1) */
const Action = Text(200).pipe(Schema.filter((s) => !/\p{Cc}/u.test(s), { message: () => "action must not contain control characters" }))

export class AuditApi extends HttpApiGroup.make("audit")
  .add(
    HttpApiEndpoint.post("log", "/v1/audit/log")
      .setPayload(Schema.Struct({
        agentId: Text(100),
        agentDid: Text(300),
        grantId: Text(100),
        principalId: Text(200),
        // any non-empty action (e.g. `gmail/send`, `Send Email`); the `service.` prefix is checked by the handler
        action: Action,
        metadata: Schema.optional(BoundedMetadata),
        status: Schema.optional(Schema.Literal("success", "failure", "blocked"))
      }))
      .addSuccess(AuditEntryView, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("entries", "/v1/audit/entries")
      .setUrlParams(Schema.Struct({
        agentId: Schema.optional(Schema.String),
        grantId: Schema.optional(Schema.String),
        principalId: Schema.optional(Schema.String),
        action: Schema.optional(Schema.String),
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ entries: Schema.Array(AuditEntryView), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("verify", "/v1/audit/verify")
      .addSuccess(Schema.Struct({
        valid: Schema.Boolean, checkedEntries: Schema.Number, firstBrokenAt: Schema.NullOr(Schema.String),
        // decisions §21: entries erased, and erased version-1 entries checked by their links only
        erasedEntries: Schema.Number, linkOnlyEntries: Schema.Number
      }))
  )
  .add(HttpApiEndpoint.get("get", "/v1/audit/:id").setPath(Schema.Struct({ id: Schema.String })).addSuccess(AuditEntryView).addError(NotFound))
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(AUDIT_DOCS))
{}
