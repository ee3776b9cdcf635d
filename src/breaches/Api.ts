/**
 * DPDP breach register (interface: Breach register; decisions §8). Bodies are declared as free
 * JSON and validated in Validate.ts, so unknown fields and every bad value answer BAD_REQUEST.
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, BreachClosed, InvalidTransition, NotFound, ReportIncomplete } from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { BREACHES_DOCS } from "./Docs.ts"

const Nullable = Schema.NullOr(Schema.String)

export const PrincipalIntimation = Schema.Struct({
  due: Schema.Literal("without_delay"),
  intimatedCount: Schema.Number,
  pendingCount: Schema.NullOr(Schema.Number),
  lastIntimatedAt: Nullable
})

export const Breach = Schema.Struct({
  breachId: Schema.String,
  status: Schema.Literal("open", "initial_intimated", "reported", "closed"),
  description: Schema.String,
  nature: Schema.String,
  extent: Schema.String,
  occurredAt: Nullable,
  awareAt: Schema.String,
  location: Nullable,
  likelyImpact: Nullable,
  affectedCount: Schema.Number,
  affectedDataPrincipalIds: Schema.optional(Schema.Array(Schema.String)),
  mitigation: Nullable,
  detailedReport: Schema.Struct({
    updatedDetails: Nullable,
    factsCircumstancesReasons: Nullable,
    mitigation: Nullable,
    causeFindings: Nullable,
    remedialMeasures: Nullable
  }),
  boardInitialIntimationRequired: Schema.Boolean,
  boardInitialIntimationSentAt: Nullable,
  boardDetailedReportDueAt: Schema.String,
  boardDetailedReportSentAt: Nullable,
  boardDetailedReportOverdue: Schema.Boolean,
  boardDetailedReportLate: Schema.Boolean,
  extension: Schema.NullOr(Schema.Struct({ requestedAt: Schema.String, granted: Schema.NullOr(Schema.Boolean), newDueAt: Nullable })),
  principalIntimationRequired: Schema.Boolean,
  principalIntimation: PrincipalIntimation,
  createdAt: Schema.String,
  updatedAt: Nullable,
  closedAt: Nullable
})

export const Intimation = Schema.Struct({
  intimationId: Schema.String,
  channel: Schema.String,
  intimatedAt: Schema.String,
  principalCount: Schema.Number,
  contentIncluded: Schema.Array(Schema.String),
  contentMissing: Schema.Array(Schema.String),
  createdAt: Schema.String
})

const Path = Schema.Struct({ breachId: Schema.String })

export class BreachesApi extends HttpApiGroup.make("breaches")
  .add(
    HttpApiEndpoint.post("record", "/v1/dpdp/breaches")
      .setPayload(Schema.Unknown)
      .addSuccess(Schema.Struct({ ...Breach.fields, principalIntimations: Schema.Array(Intimation) }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/dpdp/breaches")
      .setUrlParams(Schema.Struct({
        status: Schema.optional(Schema.Literal("open", "initial_intimated", "reported", "closed")),
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ breaches: Schema.Array(Breach), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/dpdp/breaches/:breachId")
      .setPath(Path)
      .addSuccess(Schema.Struct({ ...Breach.fields, principalIntimations: Schema.Array(Intimation) }))
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.patch("update", "/v1/dpdp/breaches/:breachId")
      .setPath(Path)
      .setPayload(Schema.Unknown)
      .addSuccess(Breach)
      .addError(BadRequest)
      .addError(ReportIncomplete)
      .addError(BodyErrors)
      .addError(NotFound)
      .addError(InvalidTransition)
      .addError(BreachClosed)
  )
  .add(
    HttpApiEndpoint.post("intimate", "/v1/dpdp/breaches/:breachId/principal-intimations")
      .setPath(Path)
      .setPayload(Schema.Unknown)
      .addSuccess(Schema.Struct({
        breachId: Schema.String,
        intimationId: Schema.String,
        channel: Schema.String,
        intimatedAt: Schema.String,
        principalCount: Schema.Number,
        contentIncluded: Schema.Array(Schema.String),
        contentMissing: Schema.Array(Schema.String),
        createdAt: Schema.String,
        principalIntimation: PrincipalIntimation
      }), { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(NotFound)
      .addError(BreachClosed)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(BREACHES_DOCS))
{}
