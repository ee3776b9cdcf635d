/**
 * The service's errors: one Schema.TaggedError class per error code (decisions §1), made by one
 * factory. The class fixes the `code` and the HTTP status; its tag is the code in PascalCase
 * (BUNDLE_NOT_FOUND → BundleNotFound), so handlers, services and tests can `Effect.catchTag` one
 * code, and each endpoint `.addError`s exactly the codes it can answer (the OpenAPI document then
 * lists them per operation).
 *
 * On the wire an error is `{ code, message, requestId }` (+ `details` for validation): the HTTP
 * envelope (platform/HttpEnvelope.ts) drops the tag and adds the request id, so the schema shown in
 * the OpenAPI document is that wire shape, not the class's encoded form.
 */
import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/** SNAKE_CASE → PascalCase, in types and at run time, so a class's tag follows from its code. */
type Pascal<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Capitalize<Lowercase<Head>>}${Pascal<Tail>}`
  : Capitalize<Lowercase<S>>
const pascal = (code: string) =>
  code.toLowerCase().split("_").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("")

export const Details = Schema.Array(Schema.Struct({ path: Schema.String, message: Schema.String }))
export type Details = typeof Details.Type

/** The body every error answers with, as the envelope writes it. */
const wireSchema = (code: string, status: number) => ({
  type: "object",
  description: `${status} ${code}`,
  required: ["code", "message", "requestId"],
  properties: {
    code: { type: "string", enum: [code] },
    message: { type: "string", description: "What went wrong, and what to do about it" },
    requestId: { type: "string", description: "Equals the X-Request-Id response header" },
    details: {
      type: "array",
      description: "Validation errors only: one per field",
      items: {
        type: "object",
        required: ["path", "message"],
        properties: { path: { type: "string" }, message: { type: "string" } }
      }
    }
  }
})

/**
 * The factory: `class BundleNotFound extends ApiError<BundleNotFound>()("BUNDLE_NOT_FOUND", 404) {}`.
 * Construct with `new BundleNotFound({ message })` (`details` optional; `code` is fixed). A code the
 * service answers at two statuses needs two classes, so the tag can be given (see VERIFICATION_FAILED).
 */
export const ApiError = <Self = never>() =>
<const Code extends string, const Tag extends string = Pascal<Code>>(code: Code, status: number, tag?: Tag) =>
  Schema.TaggedError<Self>()(
    (tag ?? pascal(code)) as Tag,
    {
      code: Schema.Literal(code).pipe(Schema.propertySignature, Schema.withConstructorDefault(() => code)),
      message: Schema.String,
      details: Schema.optional(Details)
    },
    HttpApiSchema.annotations({ status, jsonSchema: wireSchema(code, status) })
  )

// ---- Codes answered by handlers and services ------------------------------------------------------

// 400
export class BadRequest extends ApiError<BadRequest>()("BAD_REQUEST", 400) {}
export class InvalidRequest extends ApiError<InvalidRequest>()("INVALID_REQUEST", 400) {}
export class InvalidGrant extends ApiError<InvalidGrant>()("INVALID_GRANT", 400) {}
export class InvalidToken extends ApiError<InvalidToken>()("INVALID_TOKEN", 400) {}
export class InvalidChallenge extends ApiError<InvalidChallenge>()("INVALID_CHALLENGE", 400) {}
export class ReportIncomplete extends ApiError<ReportIncomplete>()("REPORT_INCOMPLETE", 400) {}
export class InvalidRedirectUri extends ApiError<InvalidRedirectUri>()("INVALID_REDIRECT_URI", 400) {}
/** Delegation asked for a scope the parent grant lacks (400, as clients of the published protocol expect). */
export class ScopeEscalation extends ApiError<ScopeEscalation>()("SCOPE_ESCALATION", 400) {}
/** A passkey ceremony that does not verify (400); a domain's TXT check is DomainVerificationFailed (422). */
export class PasskeyVerificationFailed
  extends ApiError<PasskeyVerificationFailed>()("VERIFICATION_FAILED", 400, "PasskeyVerificationFailed")
{}
// 401
export class Unauthorized extends ApiError<Unauthorized>()("UNAUTHORIZED", 401) {}
/** SSO (decisions §12): the identity provider's answer was refused (signature, issuer, audience, nonce, state, …). */
export class SsoAuthFailed extends ApiError<SsoAuthFailed>()("SSO_AUTH_FAILED", 401) {}
// 402
export class InsufficientBudget extends ApiError<InsufficientBudget>()("INSUFFICIENT_BUDGET", 402) {}
/** A resource cap of the developer's plan (decisions §16), e.g. webhook endpoints. */
export class PlanLimitExceeded extends ApiError<PlanLimitExceeded>()("PLAN_LIMIT_EXCEEDED", 402) {}
/** A free-plan monthly quota is used up (decisions §16): authorize and code exchange stop at 100 %. */
export class QuotaExceeded extends ApiError<QuotaExceeded>()("QUOTA_EXCEEDED", 402) {}
// 403
export class Forbidden extends ApiError<Forbidden>()("FORBIDDEN", 403) {}
export class AgentSuspended extends ApiError<AgentSuspended>()("AGENT_SUSPENDED", 403) {}
export class DelegationDepthExceeded extends ApiError<DelegationDepthExceeded>()("DELEGATION_DEPTH_EXCEEDED", 403) {}
export class FidoRequired extends ApiError<FidoRequired>()("FIDO_REQUIRED", 403) {}
export class CredentialNotAllowed extends ApiError<CredentialNotAllowed>()("CREDENTIAL_NOT_ALLOWED", 403) {}
export class ConsentRequired extends ApiError<ConsentRequired>()("CONSENT_REQUIRED", 403) {}
/** The principal is deactivated or deleted in the developer's directory (decisions §11). */
export class PrincipalInactive extends ApiError<PrincipalInactive>()("PRINCIPAL_INACTIVE", 403) {}
/** SIGNUP_ENABLED=false: developers are created by an operator (`agent-auth developers create`) */
export class SignupDisabled extends ApiError<SignupDisabled>()("SIGNUP_DISABLED", 403) {}
/** A `read` API key called an operation that changes something (decisions §2): it may call GETs and POST /v1/tokens/verify. */
export class InsufficientKeyScope extends ApiError<InsufficientKeyScope>()("INSUFFICIENT_KEY_SCOPE", 403) {}
/** A policy denied the request (decisions §13). */
export class PolicyDenied extends ApiError<PolicyDenied>()("POLICY_DENIED", 403) {}
/** SSO enforce (decisions §12): the person signed in at their provider is not the request's principal. */
export class PrincipalMismatch extends ApiError<PrincipalMismatch>()("PRINCIPAL_MISMATCH", 403) {}
// 404
export class NotFound extends ApiError<NotFound>()("NOT_FOUND", 404) {}
export class AgentNotFound extends ApiError<AgentNotFound>()("AGENT_NOT_FOUND", 404) {}
export class BundleNotFound extends ApiError<BundleNotFound>()("BUNDLE_NOT_FOUND", 404) {}
// 409
export class Conflict extends ApiError<Conflict>()("CONFLICT", 409) {}
export class AlreadyRevoked extends ApiError<AlreadyRevoked>()("ALREADY_REVOKED", 409) {}
export class BundleRevoked extends ApiError<BundleRevoked>()("BUNDLE_REVOKED", 409) {}
export class BundleExpired extends ApiError<BundleExpired>()("BUNDLE_EXPIRED", 409) {}
export class BreachClosed extends ApiError<BreachClosed>()("BREACH_CLOSED", 409) {}
export class InvalidTransition extends ApiError<InvalidTransition>()("INVALID_TRANSITION", 409) {}
export class GrantNotActive extends ApiError<GrantNotActive>()("GRANT_NOT_ACTIVE", 409) {}
/** A compliance export job that is not complete yet (decisions §15). */
export class ExportNotReady extends ApiError<ExportNotReady>()("EXPORT_NOT_READY", 409) {}
/** An anomaly alert channel beyond the 20 a developer may have (decisions §14). */
export class TooManyChannels extends ApiError<TooManyChannels>()("TOO_MANY_CHANNELS", 409) {}
// 410
export class Gone extends ApiError<Gone>()("GONE", 410) {}
export class RequestNotPending extends ApiError<RequestNotPending>()("REQUEST_NOT_PENDING", 410) {}
// passkey management and principal sessions (decisions §12, §17)
export class TooManyCredentials extends ApiError<TooManyCredentials>()("TOO_MANY_CREDENTIALS", 409) {}
export class UnknownCredential extends ApiError<UnknownCredential>()("UNKNOWN_CREDENTIAL", 403) {}
export class AuthenticatorNotAllowed extends ApiError<AuthenticatorNotAllowed>()("AUTHENTICATOR_NOT_ALLOWED", 403) {}
export class AttestationAnchorsRequired extends ApiError<AttestationAnchorsRequired>()("ATTESTATION_ANCHORS_REQUIRED", 422) {}
/** A genuine passkey signature whose counter did not grow: a cloned authenticator (403, decisions §17). */
export class PasskeyCounterRegressed
  extends ApiError<PasskeyCounterRegressed>()("VERIFICATION_FAILED", 403, "PasskeyCounterRegressed")
{}
// 413
/** An inline evidence pack above 50,000 audit entries: use an export job (decisions §15). */
export class ExportTooLarge extends ApiError<ExportTooLarge>()("EXPORT_TOO_LARGE", 413) {}
// 422
export class InvalidScopes extends ApiError<InvalidScopes>()("INVALID_SCOPES", 422) {}
export class InvalidTtl extends ApiError<InvalidTtl>()("INVALID_TTL", 422) {}
export class NoCredentials extends ApiError<NoCredentials>()("NO_CREDENTIALS", 422) {}
/** A policy set that does not parse or validate against the schema (decisions §13). */
export class PolicyInvalid extends ApiError<PolicyInvalid>()("POLICY_INVALID", 422) {}
/** No TXT record with the expected value (422); a passkey that does not verify is PasskeyVerificationFailed (400). */
export class DomainVerificationFailed
  extends ApiError<DomainVerificationFailed>()("VERIFICATION_FAILED", 422, "DomainVerificationFailed")
{}
/** SSO login for a domain no active connection claims (no fallback to another connection). */
export class DomainNotConfigured extends ApiError<DomainNotConfigured>()("DOMAIN_NOT_CONFIGURED", 422) {}
/** An SSO protocol the service does not speak (`ldap`). */
export class ProtocolNotSupported extends ApiError<ProtocolNotSupported>()("PROTOCOL_NOT_SUPPORTED", 422) {}
/** An anomaly channel of type `email`: named by the published protocol, not delivered by this service (decisions §14). */
export class ChannelTypeUnsupported extends ApiError<ChannelTypeUnsupported>()("CHANNEL_TYPE_UNSUPPORTED", 422) {}
// 500
export class CredentialUnreadable extends ApiError<CredentialUnreadable>()("CREDENTIAL_UNREADABLE", 500) {}
// 502
export class UpstreamRefreshFailed extends ApiError<UpstreamRefreshFailed>()("UPSTREAM_REFRESH_FAILED", 502) {}
export class DnsUnavailable extends ApiError<DnsUnavailable>()("DNS_UNAVAILABLE", 502) {}
/** SSO: the identity provider failed (unreachable, timed out, malformed discovery or token answer). */
export class SsoError extends ApiError<SsoError>()("SSO_ERROR", 502) {}
// 503
/** Billing checkout, portal and webhook until a payment provider is configured (decisions §16). */
export class ServiceUnavailable extends ApiError<ServiceUnavailable>()("SERVICE_UNAVAILABLE", 503) {}

// ---- Codes answered by the envelope and the rate-limit gate (declared for the document) -----------

/** An unknown route is NotFound (404 NOT_FOUND), as above. */
export class PayloadTooLarge extends ApiError<PayloadTooLarge>()("PAYLOAD_TOO_LARGE", 413) {}
export class UnsupportedMediaType extends ApiError<UnsupportedMediaType>()("UNSUPPORTED_MEDIA_TYPE", 415) {}
/** The per-route limiter (per source address, or per key where the route says so). */
export class RateLimited extends ApiError<RateLimited>()("RATE_LIMITED", 429) {}
/** The developer's plan budget (interface: Rate-limit errors). */
export class RateLimitExceeded extends ApiError<RateLimitExceeded>()("RATE_LIMIT_EXCEEDED", 429) {}
export class InternalError extends ApiError<InternalError>()("INTERNAL_ERROR", 500) {}
export class DatabaseUnavailable extends ApiError<DatabaseUnavailable>()("DATABASE_UNAVAILABLE", 503) {}
/** The plan-budget store did not answer (it fails closed). */
export class RateLimitUnavailable extends ApiError<RateLimitUnavailable>()("RATE_LIMIT_UNAVAILABLE", 503) {}

/** Every error a handler can fail with (for signatures that do not care which). */
export type ApiFailure =
  | BadRequest | InvalidRequest | InvalidGrant | InvalidToken | InvalidChallenge | ReportIncomplete | InvalidRedirectUri
  | PasskeyVerificationFailed | Unauthorized | InsufficientBudget | PlanLimitExceeded | QuotaExceeded | Forbidden | AgentSuspended | ScopeEscalation
  | DelegationDepthExceeded | FidoRequired | CredentialNotAllowed | ConsentRequired | PrincipalInactive | PolicyDenied | PolicyInvalid | NotFound | AgentNotFound | BundleNotFound
  | Conflict | AlreadyRevoked | BundleRevoked | BundleExpired | BreachClosed | InvalidTransition | GrantNotActive
  | Gone | RequestNotPending | InvalidScopes | InvalidTtl | NoCredentials | DomainVerificationFailed
  | CredentialUnreadable | UpstreamRefreshFailed | DnsUnavailable | PayloadTooLarge
  | TooManyCredentials | UnknownCredential | AuthenticatorNotAllowed | AttestationAnchorsRequired | PasskeyCounterRegressed
  | ExportNotReady | ExportTooLarge
  | SsoAuthFailed | SsoError | PrincipalMismatch | DomainNotConfigured | ProtocolNotSupported
  | TooManyChannels | ChannelTypeUnsupported | InsufficientKeyScope

// ---- What the gate and the envelope answer, declared once per group -------------------------------

/** Any route the limiter sees (all but health, JWKS and the favicon), whose handler reads the database. */
export const PublicRouteErrors = Schema.Union(RateLimited, RateLimitUnavailable, DatabaseUnavailable, InternalError)
/** An API-key route: the key, the developer's plan budget, then the same as any route. */
export const ApiKeyRouteErrors = Schema.Union(Unauthorized, RateLimitExceeded, PublicRouteErrors)
/** A route that reads a JSON body: too large, or not sent as JSON. */
export const BodyErrors = Schema.Union(PayloadTooLarge, UnsupportedMediaType)
