/** Consent bundles: offline authorization packages for on-device agents (interface: Consent bundles). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  AgentNotFound, AgentSuspended, AlreadyRevoked, ApiKeyRouteErrors, BodyErrors, BundleExpired, BundleNotFound, BundleRevoked,
  ConsentRequired, InvalidRequest, InvalidScopes, InvalidTtl, PlanLimitExceeded, PolicyDenied, PrincipalInactive
} from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { CONSENT_BUNDLES_DOCS } from "./Docs.ts"

const Jwk = Schema.Struct({ kty: Schema.String, kid: Schema.String, n: Schema.String, e: Schema.String, alg: Schema.String, use: Schema.String })

export const BundleResponse = Schema.Struct({
  bundleId: Schema.String,
  grantToken: Schema.String,
  jwksSnapshot: Schema.Struct({ keys: Schema.Array(Jwk), fetchedAt: Schema.String, validUntil: Schema.String }),
  offlineAuditKey: Schema.Struct({ publicKey: Schema.String, privateKey: Schema.String, algorithm: Schema.String }),
  checkpointAt: Schema.Number,
  syncEndpoint: Schema.String,
  offlineExpiresAt: Schema.String
})

export const BundleSummary = Schema.Struct({
  id: Schema.String,
  agentId: Schema.String,
  userId: Schema.String,
  scopes: Schema.Array(Schema.String),
  offlineExpiresAt: Schema.String,
  status: Schema.Literal("active", "expired", "revoked"),
  createdAt: Schema.String,
  lastSyncAt: Schema.NullOr(Schema.String),
  auditEntryCount: Schema.Number
})

const IdPath = Schema.Struct({ id: Schema.String })
const Text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))

export class ConsentBundlesApi extends HttpApiGroup.make("consentBundles")
  .add(
    HttpApiEndpoint.post("create", "/v1/consent-bundles")
      .setPayload(Schema.Struct({
        agentId: Text(100),
        userId: Text(200),
        scopes: Schema.Array(Text(200)).pipe(Schema.maxItems(100)),
        offlineTTL: Schema.optional(Schema.String),
        offlineAuditKeyAlgorithm: Schema.optional(Schema.String),
        // decisions §12: an approved authorization request, required under fidoRequired or SSO enforce
        consentRequestId: Schema.optional(Text(100))
      }))
      .addSuccess(BundleResponse, { status: 201 })
      .addError(InvalidRequest)
      .addError(PolicyDenied)
      .addError(BodyErrors)
      .addError(AgentNotFound)
      .addError(AgentSuspended)
      .addError(PrincipalInactive)
      .addError(ConsentRequired)
      .addError(InvalidScopes)
      .addError(InvalidTtl)
      .addError(PlanLimitExceeded)
      .annotate(RatePolicy, { routeLimit: 10 })
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/consent-bundles")
      .setUrlParams(Schema.Struct({
        agentId: Schema.optional(Schema.String),
        status: Schema.optional(Schema.Literal("active", "expired", "revoked")),
        cursor: Schema.optional(Schema.String),
        limit: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ bundles: Schema.Array(BundleSummary), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(InvalidRequest)
      .annotate(RatePolicy, { routeLimit: 100 })
  )
  .add(HttpApiEndpoint.get("get", "/v1/consent-bundles/:id").setPath(IdPath).addSuccess(BundleSummary).addError(BundleNotFound))
  .add(
    HttpApiEndpoint.post("revoke", "/v1/consent-bundles/:id/revoke")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ bundleId: Schema.String, status: Schema.Literal("revoked"), revokedAt: Schema.String }))
      .addError(BundleNotFound)
      .addError(AlreadyRevoked)
      .annotate(RatePolicy, { routeLimit: 20, developerBudget: "containment" })
  )
  .add(
    HttpApiEndpoint.get("revocationStatus", "/v1/consent-bundles/:id/revocation-status")
      .setPath(IdPath)
      .addSuccess(Schema.Struct({ bundleId: Schema.String, status: Schema.Literal("active", "revoked"), revokedAt: Schema.NullOr(Schema.String) }))
      .addError(BundleNotFound)
      .annotate(RatePolicy, { routeLimit: 100, developerBudget: "revocationStatus" })
  )
  .add(
    HttpApiEndpoint.post("refresh", "/v1/consent-bundles/:id/refresh")
      .setPath(IdPath)
      .addSuccess(BundleResponse)
      .addError(BundleNotFound)
      .addError(BundleRevoked)
      .addError(BundleExpired)
      .addError(AgentSuspended)
      .addError(PrincipalInactive)
      .addError(PolicyDenied)
      .annotate(RatePolicy, { routeLimit: 10 })
  )
  .middleware(Authentication)
  .addError(ApiKeyRouteErrors)
  .pipe(documented(CONSENT_BUNDLES_DOCS))
{}
