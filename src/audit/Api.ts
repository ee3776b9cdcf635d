/** The main audit log: one hash chain per developer (decisions §3). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, NotFound } from "../platform/Errors.ts"
import { BoundedMetadata } from "../platform/Metadata.ts"

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
  status: Schema.String
})

const Text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

export class AuditApi extends HttpApiGroup.make("audit")
  .add(
    HttpApiEndpoint.post("log", "/v1/audit/log")
      .setPayload(Schema.Struct({
        agentId: Text(100),
        agentDid: Text(300),
        grantId: Text(100),
        principalId: Text(200),
        // any non-empty action (e.g. `gmail/send`, `Send Email`); the `service.` prefix is checked by the handler
        action: Text(200),
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
      .addSuccess(Schema.Struct({ valid: Schema.Boolean, checkedEntries: Schema.Number, firstBrokenAt: Schema.NullOr(Schema.String) }))
  )
  .add(HttpApiEndpoint.get("get", "/v1/audit/:id").setPath(Schema.Struct({ id: Schema.String })).addSuccess(AuditEntryView).addError(NotFound))
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
{}
