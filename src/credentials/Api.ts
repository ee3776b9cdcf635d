/**
 * Verifiable credentials and DIDs (decisions §18): the service's DID document, credentials issued for
 * grants, their status lists, and verification and presentation that fail closed.
 */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  AgentSuspended, ApiKeyRouteErrors, BadRequest, BodyErrors, NotFound, PolicyDenied, PrincipalInactive, PublicRouteErrors
} from "../platform/Errors.ts"
import { LimitParam } from "../platform/Pagination.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { CREDENTIALS_DOCS } from "./Docs.ts"

export const CredentialView = Schema.Struct({
  id: Schema.String,
  grantId: Schema.String,
  developerId: Schema.String,
  principalId: Schema.String,
  agentDid: Schema.String,
  format: Schema.Literal("vc+jwt", "dc+sd-jwt"),
  credential: Schema.String,
  status: Schema.Literal("active", "revoked", "suspended", "expired"),
  statusListIdx: Schema.Number,
  revocationListId: Schema.String,
  suspensionListId: Schema.String,
  issuedAt: Schema.String,
  expiresAt: Schema.String,
  revokedAt: Schema.NullOr(Schema.String)
})

const Checks = Schema.Struct({
  format: Schema.NullOr(Schema.String),
  signature: Schema.Boolean,
  issuer: Schema.Boolean,
  validity: Schema.Boolean,
  status: Schema.Boolean,
  disclosures: Schema.optional(Schema.Boolean),
  keyBinding: Schema.optional(Schema.Boolean)
})

const Verification = Schema.Struct({
  valid: Schema.Boolean,
  vcId: Schema.NullOr(Schema.String),
  payload: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  revoked: Schema.Boolean,
  suspended: Schema.Boolean,
  expired: Schema.Boolean,
  error: Schema.NullOr(Schema.String),
  checks: Checks
})

const Presentation = Schema.Struct({
  valid: Schema.Boolean,
  vcId: Schema.NullOr(Schema.String),
  disclosedClaims: Schema.NullOr(Schema.Record({ key: Schema.String, value: Schema.Unknown })),
  revoked: Schema.Boolean,
  suspended: Schema.Boolean,
  expired: Schema.Boolean,
  error: Schema.NullOr(Schema.String),
  checks: Checks
})

/** `credentialFormat` and `holderKey` on POST /v1/token and /v1/grants/delegate (checked by the service) */
export const CredentialRequestFields = {
  credentialFormat: Schema.optional(Schema.String.pipe(Schema.maxLength(50))),
  holderKey: Schema.optional(Schema.Unknown)
}
/** what those answer besides the grant token */
export const IssuedCredentialFields = {
  verifiableCredential: Schema.optional(Schema.String),
  sdJwtCredential: Schema.optional(Schema.String)
}

const Text = (contentType: string) => Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType }))
const Token = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(65_536))

export class CredentialsApi extends HttpApiGroup.make("credentials")
  .add(HttpApiEndpoint.get("didDocument", "/.well-known/did.json").addSuccess(Schema.Unknown).annotate(RatePolicy, { exempt: true }))
  .add(HttpApiEndpoint.get("context", "/ns/agent-auth/v1").addSuccess(Schema.Unknown).annotate(RatePolicy, { exempt: true }))
  .add(HttpApiEndpoint.get("typeMetadata", "/vct/agent-grant").addSuccess(Schema.Unknown).annotate(RatePolicy, { exempt: true }))
  .add(
    HttpApiEndpoint.get("statusList", "/v1/credentials/status/:listId")
      .setPath(Schema.Struct({ listId: Schema.String }))
      .addSuccess(Text("application/vc+jwt"))
      .addError(NotFound)
      .addError(PublicRouteErrors)
      .annotate(RatePolicy, { routeLimit: 600 })
  )
  .add(
    HttpApiEndpoint.post("verify", "/v1/credentials/verify")
      .setPayload(Schema.Struct({ credential: Token }))
      .addSuccess(Verification)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(PublicRouteErrors)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.post("present", "/v1/credentials/present")
      .setPayload(Schema.Struct({
        sdJwt: Token,
        nonce: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500))),
        audience: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500)))
      }))
      .addSuccess(Presentation)
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(PublicRouteErrors)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.post("issue", "/v1/credentials/issue")
      .setPayload(Schema.Struct({
        grantId: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)),
        format: Schema.String.pipe(Schema.maxLength(50)),
        holderKey: Schema.optional(Schema.Unknown)
      }))
      .addSuccess(CredentialView, { status: 201 })
      .addError(BadRequest)
      .addError(NotFound)
      .addError(AgentSuspended)
      .addError(PrincipalInactive)
      .addError(PolicyDenied)
      .addError(BodyErrors)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/credentials")
      .setUrlParams(Schema.Struct({
        grantId: Schema.optional(Schema.String),
        principalId: Schema.optional(Schema.String),
        status: Schema.optional(Schema.Literal("active", "revoked")),
        cursor: Schema.optional(Schema.String),
        limit: LimitParam
      }))
      .addSuccess(Schema.Struct({ credentials: Schema.Array(CredentialView), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/credentials/:id")
      .setPath(Schema.Struct({ id: Schema.String }))
      .addSuccess(CredentialView)
      .addError(NotFound)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .pipe(documented(CREDENTIALS_DOCS))
{}
