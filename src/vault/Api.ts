/** Credential vault (interface: Credential vault; decisions §9). No response ever carries a token or secret. */
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  ApiKeyRouteErrors, BadRequest, BodyErrors, CredentialUnreadable, Forbidden, NotFound, PrincipalInactive, PublicRouteErrors, Unauthorized,
  UpstreamRefreshFailed
} from "../platform/Errors.ts"
import { LimitParam } from "../platform/Pagination.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { BoundedMetadata } from "../platform/Metadata.ts"
import { documented } from "../platform/OperationDocs.ts"
import { VAULT_DOCS } from "./Docs.ts"

const Secret = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(16_384))
const Identifier = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(256))
export const ServiceName = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/, {
    message: () => "must be 1-100 letters, digits, '.', '_' or '-' (starting with a letter or digit)"
  })
)
const Timestamp = Schema.String.pipe(
  Schema.filter((s) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/.test(s) && !Number.isNaN(Date.parse(s)), {
    message: () => "must be an ISO 8601 timestamp with a time zone"
  })
)
const Metadata = BoundedMetadata

export const StoreCredential = Schema.Struct({
  principalId: Identifier,
  service: ServiceName,
  credentialType: Schema.optional(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64))),
  accessToken: Secret,
  refreshToken: Schema.optional(Schema.NullOr(Secret)),
  tokenExpiresAt: Schema.optional(Schema.NullOr(Timestamp)),
  metadata: Schema.optional(Schema.NullOr(Metadata)),
  tokenEndpoint: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(2048)))),
  clientId: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(1024)))),
  clientSecret: Schema.optional(Schema.NullOr(Secret))
})
export type StoreCredential = typeof StoreCredential.Type

/** What the management endpoints answer: never a token, refresh token or client secret. */
export const CredentialView = Schema.Struct({
  id: Schema.String,
  principalId: Schema.String,
  service: Schema.String,
  credentialType: Schema.String,
  tokenExpiresAt: Schema.NullOr(Schema.String),
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  hasRefreshToken: Schema.Boolean,
  tokenEndpoint: Schema.NullOr(Schema.String),
  refreshedAt: Schema.NullOr(Schema.String),
  createdAt: Schema.String,
  updatedAt: Schema.String
})

/** Interface: VaultCredential (exchange response). */
export const VaultCredential = Schema.Struct({
  accessToken: Schema.String,
  service: Schema.String,
  credentialType: Schema.String,
  tokenExpiresAt: Schema.NullOr(Schema.String),
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})

const IdPath = Schema.Struct({ id: Schema.String })

export class VaultApi extends HttpApiGroup.make("vault")
  .add(
    HttpApiEndpoint.post("store", "/v1/vault/credentials")
      .setPayload(StoreCredential)
      .addSuccess(CredentialView, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/vault/credentials")
      .setUrlParams(Schema.Struct({
        principalId: Schema.optional(Schema.String),
        service: Schema.optional(Schema.String),
        cursor: Schema.optional(Schema.String),
        limit: LimitParam
      }))
      .addSuccess(Schema.Struct({ credentials: Schema.Array(CredentialView), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
      .addError(ApiKeyRouteErrors)
      .middleware(Authentication)
  )
  .add(
    // Declared before ":id" routes; the body is read by the handler itself so that the error order
    // is exactly 401 (token, online grant status) → 400 (`service`) → 403 (scope) → 404 (credential).
    HttpApiEndpoint.post("exchange", "/v1/vault/credentials/exchange")
      .addSuccess(VaultCredential)
      .addError(BadRequest)
      .addError(Unauthorized)
      .addError(BodyErrors)
      .addError(Forbidden)
      .addError(PrincipalInactive)
      .addError(NotFound)
      .addError(UpstreamRefreshFailed)
      .addError(CredentialUnreadable)
      .annotate(RatePolicy, { grantToken: true, routeLimit: 20, routeKey: "grantToken" })
      .annotate(OpenApi.Description, "Body: `{ \"service\": string }`. Authorization: `Bearer <grant token>` (no API key).")
      // the body the handler reads, described for clients and SDK generators (not decoded by the platform)
      .annotate(OpenApi.Override, {
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { type: "object", required: ["service"], properties: { service: { type: "string", minLength: 1, maxLength: 100 } } }
            }
          }
        }
      })
  )
  .add(
    HttpApiEndpoint.get("get", "/v1/vault/credentials/:id")
      .setPath(IdPath)
      .addSuccess(CredentialView)
      .addError(ApiKeyRouteErrors)
      .addError(NotFound)
      .middleware(Authentication)
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/vault/credentials/:id")
      .setPath(IdPath)
      .addSuccess(HttpApiSchema.NoContent)
      .addError(ApiKeyRouteErrors)
      .addError(NotFound)
      .middleware(Authentication)
  )
  .addError(PublicRouteErrors)
  .pipe(documented(VAULT_DOCS))
{}
