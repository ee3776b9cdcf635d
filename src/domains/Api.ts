/**
 * Custom domains (interface: Domain, GET /v1/domains; decisions §9).
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | create | 400 | BAD_REQUEST | `domain` missing, not a host name, an IP address, a single label |
 * | create | 409 | CONFLICT | this developer already added the domain, or another developer has verified it |
 * | verify | 404 | NOT_FOUND | no such domain for this developer |
 * | verify | 409 | CONFLICT | another developer verified the domain first |
 * | verify | 422 | VERIFICATION_FAILED | no TXT record at `_agent-auth.<domain>`, or none equals `agent-auth-verify=<token>` |
 * | verify | 502 | DNS_UNAVAILABLE | the resolver failed (SERVFAIL, timeout, unreachable) |
 * | delete | 404 | NOT_FOUND | no such domain for this developer |
 * | all | 401 | UNAUTHORIZED | invalid or missing API key |
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import {
  ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, DnsUnavailable, DomainVerificationFailed, NotFound
} from "../platform/Errors.ts"
import { documented } from "../platform/OperationDocs.ts"
import { DOMAINS_DOCS } from "./Docs.ts"

export const Domain = Schema.Struct({
  id: Schema.String,
  domain: Schema.String,
  verified: Schema.Boolean,
  verifiedAt: Schema.NullOr(Schema.String),
  createdAt: Schema.String
})

export const CreatedDomain = Schema.Struct({
  ...Domain.fields,
  verificationToken: Schema.String,
  instructions: Schema.String,
  verificationRecord: Schema.Struct({ type: Schema.Literal("TXT"), name: Schema.String, value: Schema.String })
})

const IdPath = Schema.Struct({ id: Schema.String })

export class DomainsApi extends HttpApiGroup.make("domains")
  .add(
    HttpApiEndpoint.get("list", "/v1/domains")
      .addSuccess(Schema.Struct({ domains: Schema.Array(Domain) }))
  )
  .add(
    HttpApiEndpoint.post("create", "/v1/domains")
      .setPayload(Schema.Struct({ domain: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(300)) }))
      .addSuccess(CreatedDomain, { status: 201 })
      .addError(BadRequest)
      .addError(BodyErrors)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.post("verify", "/v1/domains/:id/verify")
      .setPath(IdPath)
      .addSuccess(Domain)
      .addError(NotFound)
      .addError(Conflict)
      .addError(DomainVerificationFailed)
      .addError(DnsUnavailable)
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/domains/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(DOMAINS_DOCS))
{}
