/**
 * The authorization service's shape (decisions §3): its inputs and answers, apart from the service
 * (Service.ts) and the token exchanges (Tokens.ts) that both implement it.
 */
import type { Effect } from "effect"
import type { Developer } from "../platform/Auth.ts"
import type {
  AgentNotFound, AgentSuspended, BadRequest, FidoRequired, Forbidden, Gone, InvalidGrant, InvalidRedirectUri, InvalidScopes, NotFound,
  PlanLimitExceeded, PolicyDenied, PrincipalInactive, PrincipalMismatch, QuotaExceeded
} from "../platform/Errors.ts"
import type { Allowed } from "../gate/Gate.ts"
import type { OAuthRequestFacts } from "./Lookups.ts"
import type { BindRefusal, PageNotice } from "../dpdp/ApprovalConsent.ts"
import type { SsoApproval } from "./SsoBinding.ts"

export interface AuthorizeInput {
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly expiresIn?: string
  readonly redirectUri?: string
  readonly state?: string
  readonly audience?: string
  readonly codeChallenge?: string
  readonly codeChallengeMethod?: string
  /** decisions §21: the notice the person is shown and consents under (a record is made when a person approves) */
  readonly consentNoticeId?: string
  readonly consentNoticeVersion?: string
  readonly purposes?: ReadonlyArray<string>
  readonly language?: string
  readonly principalType?: string
  readonly guardianVerification?: unknown
}

export interface ConsentView {
  readonly id: string
  readonly agentName: string
  readonly agentDid: string
  readonly agentDescription: string | null
  readonly scopes: ReadonlyArray<string>
  readonly scopeDescriptions: Record<string, string>
  readonly expiresAt: string
  readonly status: "authenticating" | "pending" | "approved" | "denied" | "expired"
  readonly fidoRequired: boolean
  readonly redirectUri: string | null
  readonly principalId: string
  readonly developerId: string
  /** who asks: the developer's account name (the consent page names them) */
  readonly developerName: string
  /** how long access lasts once approved */
  readonly grantTtlSeconds: number
  /** decisions §22.5: an OAuth authorization's facts, and the hash of its browser's interaction cookie */
  readonly oauth: OAuthRequestFacts | null
  readonly interactionCookieHash: string | null
  /** decisions §21: the notice the request is pinned to, as the page shows it; null when none */
  readonly notice: PageNotice | null
}

export interface Approval {
  readonly code: string
  readonly grantId: string
  readonly redirectUri: string | null
  readonly state: string | null
}

export interface TokenResponse {
  readonly grantToken: string
  readonly expiresAt: string
  readonly scopes: ReadonlyArray<string>
  readonly refreshToken: string
  readonly grantId: string
  readonly verifiableCredential?: string
  readonly sdJwtCredential?: string
}

export interface AuthorizationService {
  readonly authorize: (developer: Developer, input: AuthorizeInput) => Effect.Effect<
    {
      authRequestId: string; consentUrl: string; expiresAt: string; sandbox?: true; code?: string
      policyEnforced?: true; effect?: "allow"; policyId?: string
    },
    BadRequest | InvalidRedirectUri | AgentNotFound | InvalidScopes | AgentSuspended | PrincipalInactive | PolicyDenied | QuotaExceeded | PlanLimitExceeded
    | BindRefusal
  >
  /** the consent page's view of a request; NotFound when unknown */
  /** the request as its consent page shows it; `language`: the person's choice among the notice's variants */
  readonly consent: (authRequestId: string, language?: string) => Effect.Effect<ConsentView, NotFound>
  readonly getPendingRequest: (authRequestId: string) => Effect.Effect<
    { id: string; developerId: string; agentId: string; principalId: string; scopes: ReadonlyArray<string>; expiresAt: Date } | undefined
  >
  /** approve a pending request: the grant, its grant.created event and a single-use code, in one transaction */
  readonly approveRequest: (
    authRequestId: string,
    options: {
      readonly fidoVerified: boolean
      /** the person's SSO sign-in, read only when the developer requires SSO (most approvals never pay for it) */
      readonly sso: Effect.Effect<SsoApproval | undefined>
      /** the language the person read the notice in (decisions §21), when the page offered a choice */
      readonly language?: string | undefined
      /**
       * decisions §22.5: the answering browser's cookies, checked against the locked request's
       * interaction cookie (an OAuth request is answered only in the browser that started it), or
       * "checked" when the caller already checked them on the request's view, or "passkey" when the
       * person's own passkey assertion answers (no cookie of the starting browser is asked)
       */
      readonly browser: { readonly cookies: Readonly<Record<string, string | undefined>> } | "checked" | "passkey"
    }
  ) => Effect.Effect<Approval, Gone | NotFound | AgentSuspended | FidoRequired | PrincipalInactive | PrincipalMismatch | Forbidden | PolicyDenied>
  readonly denyRequest: (authRequestId: string) => Effect.Effect<{ redirectUri: string | null; state: string | null }, Gone | NotFound>
  readonly exchangeCode: (
    developer: Developer,
    input: { code: string; agentId: string; codeVerifier?: string; credentialFormat?: string; holderKey?: unknown }
  ) => Effect.Effect<TokenResponse, InvalidGrant | AgentSuspended | BadRequest | QuotaExceeded | PrincipalInactive | PolicyDenied>
  readonly refresh: (developer: Developer, input: { refreshToken: string; agentId: string }) => Effect.Effect<TokenResponse, InvalidGrant | AgentSuspended | PrincipalInactive>
  /**
   * decisions §22.5: approves a request the gate already allowed without the consent page (a policy
   * allow, a sandbox developer), in the caller's gated transaction
   */
  readonly approveAllowed: (authRequestId: string, allowed: Allowed) => Effect.Effect<Approval>
  /** denies every pending request of a principal (SCIM deprovisioning), in the caller's transaction; their ids */
  readonly denyPendingForPrincipal: (developerId: string, principalId: string) => Effect.Effect<ReadonlyArray<string>>
}

