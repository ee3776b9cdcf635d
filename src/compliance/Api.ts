/** Compliance exports (decisions §15): summary, streamed and paged exports, evidence packs, jobs, DPDP exports. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, ExportNotReady, ExportTooLarge, Gone, NotFound, RateLimited } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { COMPLIANCE_DOCS } from "./Docs.ts"

const Opt = Schema.optional(Schema.String)
const Count4 = (a: string, b: string, c: string, d: string) =>
  Schema.Struct({ [a]: Schema.Number, [b]: Schema.Number, [c]: Schema.Number, [d]: Schema.Number })
const Json = Schema.Record({ key: Schema.String, value: Schema.Unknown })

export const SummaryView = Schema.Struct({
  generatedAt: Schema.String,
  since: Schema.NullOr(Schema.String),
  until: Schema.NullOr(Schema.String),
  agents: Count4("total", "active", "suspended", "revoked"),
  grants: Count4("total", "active", "revoked", "expired"),
  auditEntries: Count4("total", "success", "failure", "blocked"),
  policies: Schema.Struct({ total: Schema.Number }),
  plan: Schema.String,
  breaches: Schema.Struct({ open: Schema.Number, overdue: Schema.Number }),
  consentBundles: Schema.Struct({ active: Schema.Number, revoked: Schema.Number }),
  directory: Schema.Struct({ users: Schema.Number, deprovisioned: Schema.Number }),
  anomalies: Schema.Struct({ open: Schema.Number }),
  // decisions §21
  dpdp: Schema.Struct({
    consentRecords: Schema.Struct({ active: Schema.Number, withdrawn: Schema.Number, expired: Schema.Number, erased: Schema.Number }),
    grievances: Schema.Struct({ open: Schema.Number, overdue: Schema.Number }),
    erasures: Schema.Struct({ processing: Schema.Number, completed: Schema.Number })
  })
})

/** a finished NDJSON/CSV export's proof (§15, revised); on a job's view once it is complete */
const ProofFields = {
  exportId: Schema.optional(Schema.String),
  issuer: Schema.optional(Schema.String),
  developerId: Schema.optional(Schema.String),
  generatedAt: Schema.optional(Schema.String),
  since: Schema.optional(Schema.NullOr(Schema.String)),
  until: Schema.optional(Schema.NullOr(Schema.String)),
  filters: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
  anchor: Schema.optional(Schema.NullOr(Schema.String)),
  rows: Schema.optional(Schema.Number),
  lastHash: Schema.optional(Schema.NullOr(Schema.String)),
  kid: Schema.optional(Schema.String)
}

export const JobView = Schema.Struct({
  id: Schema.String,
  kind: Schema.String,
  format: Schema.String,
  status: Schema.Literal("pending", "running", "complete", "failed", "expired"),
  rowCounts: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Number })),
  sha256: Schema.NullOr(Schema.String),
  signature: Schema.NullOr(Schema.String),
  bytes: Schema.NullOr(Schema.Number),
  createdAt: Schema.String,
  completedAt: Schema.NullOr(Schema.String),
  expiresAt: Schema.NullOr(Schema.String),
  error: Schema.NullOr(Schema.String),
  ...ProofFields
})

const PageCommon = {
  generatedAt: Schema.String,
  total: Schema.Number,
  nextCursor: Schema.NullOr(Schema.String),
  kid: Schema.String,
  signature: Schema.String
}

export class ComplianceApi extends HttpApiGroup.make("compliance")
  .add(
    HttpApiEndpoint.get("summary", "/v1/compliance/summary")
      .setUrlParams(Schema.Struct({ since: Opt, until: Opt }))
      .addSuccess(SummaryView)
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("exportGrants", "/v1/compliance/export/grants")
      .setUrlParams(Schema.Struct({ since: Opt, until: Opt, status: Opt, format: Opt, cursor: Opt, limit: Opt, envelope: Opt }))
      .addSuccess(Schema.Struct({ ...PageCommon, grants: Schema.Array(Json) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("exportAudit", "/v1/compliance/export/audit")
      .setUrlParams(Schema.Struct({ since: Opt, until: Opt, agentId: Opt, status: Opt, action: Opt, format: Opt, cursor: Opt, limit: Opt, envelope: Opt }))
      .addSuccess(Schema.Struct({ ...PageCommon, entries: Schema.Array(Json), anchor: Schema.NullOr(Schema.String), contiguous: Schema.Boolean }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("evidencePack", "/v1/compliance/evidence-pack")
      .setUrlParams(Schema.Struct({ since: Opt, until: Opt, framework: Opt }))
      .addSuccess(Json)
      .addError(BadRequest)
      .addError(ExportTooLarge)
  )
  .add(
    HttpApiEndpoint.post("createJob", "/v1/compliance/exports")
      .setPayload(Schema.Struct({
        kind: Schema.Literal("evidence-pack", "grants", "audit"),
        since: Schema.optional(Schema.String),
        until: Schema.optional(Schema.String),
        framework: Schema.optional(Schema.Literal("soc2", "gdpr", "dpdp", "all")),
        format: Schema.optional(Schema.Literal("json", "ndjson", "csv")),
        status: Schema.optional(Schema.String),
        agentId: Schema.optional(Schema.String.pipe(Schema.maxLength(100))),
        action: Schema.optional(Schema.String.pipe(Schema.maxLength(200)))
      }))
      .addSuccess(Schema.Struct({ id: Schema.String, status: Schema.Literal("pending") }), { status: 202 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(RateLimited)
  )
  .add(
    HttpApiEndpoint.get("getJob", "/v1/compliance/exports/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(JobView)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.get("downloadJob", "/v1/compliance/exports/:id/download")
      .setPath(Schema.Struct({ id: Schema.String }))
      .setUrlParams(Schema.Struct({ envelope: Opt }))
      .addSuccess(Schema.Unknown)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(ExportNotReady)
      .addError(Gone)
  )
  .add(
    HttpApiEndpoint.post("createDpdpExport", "/v1/dpdp/exports")
      .setPayload(Schema.Struct({
        type: Schema.Literal("dpdp-audit", "gdpr-article-15", "eu-ai-act-conformance"),
        dateFrom: Schema.String,
        dateTo: Schema.String,
        format: Schema.optional(Schema.Literal("json")),
        includeActionLog: Schema.optional(Schema.Boolean),
        includeConsentRecords: Schema.optional(Schema.Boolean),
        dataPrincipalId: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(200)))
      }))
      .addSuccess(Json, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(RateLimited)
  )
  .add(
    HttpApiEndpoint.get("getDpdpExport", "/v1/dpdp/exports/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(Json)
      .addError(NotFound)
      .addError(Gone)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(COMPLIANCE_DOCS))
{}
