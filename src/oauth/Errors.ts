/**
 * OAuth errors (decisions §22.4): one Schema.TaggedError per RFC 6749 / 7591 / 8707 error code,
 * annotated with its status. They are made by the service's one error factory, so inside the
 * service they behave like every other error; only the wire shape differs: the envelope writes
 * `{ error, error_description }` for every answer under `/oauth/` (platform/HttpEnvelope.ts).
 */
import { ApiError } from "../platform/Errors.ts"

export class OAuthInvalidRequest extends ApiError<OAuthInvalidRequest>()("invalid_request", 400, "OAuthInvalidRequest") {}
export class OAuthInvalidClient extends ApiError<OAuthInvalidClient>()("invalid_client", 401, "OAuthInvalidClient") {}
export class OAuthInvalidGrant extends ApiError<OAuthInvalidGrant>()("invalid_grant", 400, "OAuthInvalidGrant") {}
export class OAuthUnauthorizedClient extends ApiError<OAuthUnauthorizedClient>()("unauthorized_client", 400, "OAuthUnauthorizedClient") {}
export class OAuthUnsupportedGrantType extends ApiError<OAuthUnsupportedGrantType>()("unsupported_grant_type", 400, "OAuthUnsupportedGrantType") {}
export class OAuthInvalidScope extends ApiError<OAuthInvalidScope>()("invalid_scope", 400, "OAuthInvalidScope") {}
export class OAuthInvalidTarget extends ApiError<OAuthInvalidTarget>()("invalid_target", 400, "OAuthInvalidTarget") {}
export class OAuthInvalidRedirectUri extends ApiError<OAuthInvalidRedirectUri>()("invalid_redirect_uri", 400, "OAuthInvalidRedirectUri") {}
export class OAuthInvalidClientMetadata extends ApiError<OAuthInvalidClientMetadata>()("invalid_client_metadata", 400, "OAuthInvalidClientMetadata") {}
export class OAuthNotFound extends ApiError<OAuthNotFound>()("not_found", 404, "OAuthNotFound") {}
export class OAuthTemporarilyUnavailable
  extends ApiError<OAuthTemporarilyUnavailable>()("temporarily_unavailable", 503, "OAuthTemporarilyUnavailable")
{}

export type TokenEndpointError =
  | OAuthInvalidRequest | OAuthInvalidClient | OAuthInvalidGrant | OAuthUnauthorizedClient | OAuthUnsupportedGrantType
  | OAuthInvalidScope | OAuthInvalidTarget

// The API-key routes of resource servers answer in the service's one error shape (decisions §22.2).
export class InvalidResourceIdentifier extends ApiError<InvalidResourceIdentifier>()("INVALID_RESOURCE_IDENTIFIER", 422) {}
export class LoginMethodRequired extends ApiError<LoginMethodRequired>()("LOGIN_METHOD_REQUIRED", 422) {}
export class SsoNotConfigured extends ApiError<SsoNotConfigured>()("SSO_NOT_CONFIGURED", 422) {}
