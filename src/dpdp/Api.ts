/**
 * DPDP consent notices, consent records and grievances (decisions §21), on the published routes with
 * their shapes, statuses and codes. Bodies are declared as free JSON and checked by the services
 * (Validate.ts), so every bad value answers 400 BAD_REQUEST with `details`; the answers are described
 * by the examples in Docs.ts.
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, GrantNotActive, InvalidGrant, InvalidTransition, NotFound, PlanLimitExceeded
} from "../platform/Errors.ts"
import { LimitParam } from "../platform/Pagination.ts"
import { documented } from "../platform/OperationDocs.ts"
import { DPDP_GRIEVANCES_DOCS, DPDP_NOTICES_DOCS, DPDP_RECORDS_DOCS } from "./Docs.ts"
import {
  AlreadyWithdrawn, InvalidNotice, InvalidRecord, NoticeHashMismatch, NoticeIncomplete, NoticeRetired, TooManyOpenGrievances, VerifiableConsentRequired
} from "./Errors.ts"

const Json = Schema.Unknown
const NoticePath = Schema.Struct({ noticeId: Schema.String })
const VersionPath = Schema.Struct({ noticeId: Schema.String, version: Schema.String })
const RecordPath = Schema.Struct({ recordId: Schema.String })
const GrievancePath = Schema.Struct({ grievanceId: Schema.String })

export class DpdpNoticesApi extends HttpApiGroup.make("dpdpNotices")
  .add(
    HttpApiEndpoint.post("register", "/v1/dpdp/consent-notices")
      .setPayload(Json)
      .addSuccess(Json, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
      .addError(PlanLimitExceeded)
      .addError(NoticeIncomplete)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/dpdp/consent-notices")
      .setUrlParams(Schema.Struct({ cursor: Schema.optional(Schema.String), limit: LimitParam }))
      .addSuccess(Json)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("versions", "/v1/dpdp/consent-notices/:noticeId").setPath(NoticePath).addSuccess(Json).addError(NotFound))
  .add(
    HttpApiEndpoint.get("version", "/v1/dpdp/consent-notices/:noticeId/versions/:version")
      .setPath(VersionPath)
      .setUrlParams(Schema.Struct({ language: Schema.optional(Schema.String) }))
      .addSuccess(Json)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("retire", "/v1/dpdp/consent-notices/:noticeId/versions/:version/retire")
      .setPath(VersionPath)
      .addSuccess(Json)
      .addError(NotFound)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(DPDP_NOTICES_DOCS))
{}

export class DpdpRecordsApi extends HttpApiGroup.make("dpdpRecords")
  .add(
    HttpApiEndpoint.post("create", "/v1/dpdp/consent-records")
      .setPayload(Json)
      .addSuccess(Json, { status: 201 })
      .addError(BadRequest)
      .addError(InvalidGrant)
      .addError(InvalidNotice)
      .addError(GrantNotActive)
      .addError(NoticeRetired)
      .addError(NoticeHashMismatch)
      .addError(VerifiableConsentRequired)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/dpdp/consent-records")
      .setUrlParams(Schema.Struct({
        dataPrincipalId: Schema.optional(Schema.String),
        grantId: Schema.optional(Schema.String),
        status: Schema.optional(Schema.Literal("active", "withdrawn", "erased", "expired")),
        cursor: Schema.optional(Schema.String),
        limit: LimitParam
      }))
      .addSuccess(Json)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/v1/dpdp/consent-records/:recordId").setPath(RecordPath).addSuccess(Json).addError(NotFound))
  .add(
    HttpApiEndpoint.post("withdraw", "/v1/dpdp/consent-records/:recordId/withdraw")
      .setPath(RecordPath)
      .setPayload(Json)
      .addSuccess(Json)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(AlreadyWithdrawn)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("principalRecords", "/v1/dpdp/data-principals/:principalId/records")
      .setPath(Schema.Struct({ principalId: Schema.String }))
      .setUrlParams(Schema.Struct({ cursor: Schema.optional(Schema.String) }))
      .addSuccess(Json)
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.put("setNomination", "/v1/dpdp/data-principals/:principalId/nomination")
      .setPath(Schema.Struct({ principalId: Schema.String }))
      .setPayload(Json)
      .addSuccess(Json)
      .addError(BadRequest)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.del("removeNomination", "/v1/dpdp/data-principals/:principalId/nomination")
      .setPath(Schema.Struct({ principalId: Schema.String }))
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("settings", "/v1/dpdp/settings").addSuccess(Json))
  .add(
    HttpApiEndpoint.patch("updateSettings", "/v1/dpdp/settings")
      .setPayload(Json)
      .addSuccess(Json)
      .addError(BadRequest)
      .addError(InvalidNotice)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.post("erase", "/v1/dpdp/data-principals/:principalId/erasure")
      .setPath(Schema.Struct({ principalId: Schema.String }))
      .addSuccess(Json, { status: 201 })
      .addError(BadRequest)
      .addError(NotFound)
      .addError(BodyErrors)
      // the body is optional, which the platform's decoding does not allow: the handler reads it
      .annotate(OpenApi.Override, {
        requestBody: {
          required: false,
          content: {
            "application/json": {
              schema: {
                type: "object",
                properties: {
                  dataPrincipalId: { type: "string", description: "must equal the path's id" },
                  reason: { type: "string", enum: ["principal_request", "retention", "withdrawal", "other"] },
                  scheduledFor: { type: "string", format: "date-time", description: "48 hours to 3 years ahead (DPDP Rule 8(2))" }
                }
              }
            }
          }
        }
      })
  )
  .add(
    HttpApiEndpoint.del("cancelErasure", "/v1/dpdp/erasures/:requestId")
      .setPath(Schema.Struct({ requestId: Schema.String }))
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(DPDP_RECORDS_DOCS))
{}

export class DpdpGrievancesApi extends HttpApiGroup.make("dpdpGrievances")
  .add(
    HttpApiEndpoint.post("file", "/v1/dpdp/grievances")
      .setPayload(Json)
      .addSuccess(Json, { status: 202 })
      .addError(BadRequest)
      .addError(InvalidRecord)
      .addError(TooManyOpenGrievances)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/dpdp/grievances")
      .setUrlParams(Schema.Struct({
        status: Schema.optional(Schema.Literal("submitted", "under_review", "resolved", "escalated")),
        dataPrincipalId: Schema.optional(Schema.String),
        overdue: Schema.optional(Schema.Literal("true", "false")),
        cursor: Schema.optional(Schema.String),
        limit: LimitParam
      }))
      .addSuccess(Json)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/v1/dpdp/grievances/:grievanceId").setPath(GrievancePath).addSuccess(Json).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/dpdp/grievances/:grievanceId")
      .setPath(GrievancePath)
      .setPayload(Json)
      .addSuccess(Json)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(InvalidTransition)
      .addError(BodyErrors)
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(DPDP_GRIEVANCES_DOCS))
{}
