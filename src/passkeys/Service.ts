/**
 * Passkeys: WebAuthn registration and assertion with @simplewebauthn/server.
 *
 * - Every ceremony starts with a stored challenge (5 minutes on the Effect Clock). A challenge is
 *   consumed by one atomic UPDATE before its response is checked, so it is single-use even when
 *   the attempt fails, and two racing attempts cannot both pass.
 * - User verification is required in both ceremonies. Origin and RP ID come from config.webauthn.
 * - Assertion challenges are bound to one pending authorization request and its principal; the
 *   credential must be registered to that principal by the same developer. The signature counter
 *   must grow (the library refuses a non-increasing counter; the stored counter is then advanced
 *   with a compare-and-set, so two assertions carrying the same counter cannot both succeed).
 * - A verified assertion approves the request through the authorization service (fidoVerified),
 *   which creates the grant and its authorization code.
 * - Management (decisions §17): random user handles, discoverable credentials, provider names,
 *   backup flags, rename, soft delete, at most 20 per principal, the Signal API data and the
 *   attestation policy (./Credentials.ts, ./Attestation.ts). A counter that goes backwards is a
 *   cloned authenticator: 403, an entry on the audit chain and an AD-011 alert (through the
 *   PasskeySignals port, ./Signals.ts).
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import {
  type AttestationAnchorsRequired, type AuthenticatorNotAllowed, type BadRequest, type Conflict, CredentialNotAllowed, type InvalidChallenge,
  NoCredentials, NotFound, PasskeyCounterRegressed, type PasskeyVerificationFailed, RequestNotPending, type TooManyCredentials,
  UnknownCredential
} from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import type { CursorPosition } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { type AttestationPolicy, configureTrustAnchors, makePolicyStore } from "./Attestation.ts"
import type { SsoApproval } from "../authorization/Service.ts"
import { Approval, type ApprovalError, type PendingRequest } from "./Approval.ts"
import { CHALLENGE_TTL_MS, invalidChallenge, makeChallenges } from "./Challenges.ts"
import { makeAssertionCheck } from "./Assertion.ts"
import { makeSignIn, type SignedInWithPasskey } from "./SignIn.ts"
import { webauthn } from "./Library.ts"
import { authenticatorType, type CredentialView, credentialView, makeCredentialStore } from "./Credentials.ts"
import { makeRegistration } from "./Registration.ts"
import { PasskeySignals } from "./Signals.ts"

export { credentialView } from "./Credentials.ts"
export type { SignedInWithPasskey } from "./SignIn.ts"

type Options = { challengeId: string; publicKey: Record<string, unknown> }

export { CHALLENGE_TTL_MS } from "./Challenges.ts"

export interface AssertionOutcome {
  readonly verified: true
  readonly grantId: string
  readonly code: string
  readonly redirectUri?: string | null | undefined
  readonly state?: string | null | undefined
  readonly fidoEvidence: {
    readonly credentialId: string
    readonly authenticatorType: string
    readonly userVerified: boolean
    readonly assertedAt: string
  }
}

export interface PasskeysService {
  readonly registrationOptions: (developerId: string, principalId: string) => Effect.Effect<Options, TooManyCredentials>
  readonly verifyRegistration: (
    developerId: string,
    input: { readonly challengeId: string; readonly response: unknown; readonly deviceName?: string | undefined }
  ) => Effect.Effect<CredentialView, InvalidChallenge | PasskeyVerificationFailed | Conflict | TooManyCredentials | AuthenticatorNotAllowed>
  readonly listCredentials: (
    developerId: string,
    principalId: string,
    page: { readonly limit: number; readonly cursor: CursorPosition | undefined }
  ) => Effect.Effect<{ credentials: Array<CredentialView>; nextCursor: string | null }>
  readonly getCredential: (developerId: string, id: string) => Effect.Effect<CredentialView, NotFound>
  readonly renameCredential: (developerId: string, id: string, deviceName: string) => Effect.Effect<CredentialView, NotFound>
  /** soft delete (kept 30 days, then purged), with fido.credential.deleted */
  readonly deleteCredential: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  /** removes every passkey of a principal (SCIM deprovisioning), in the caller's transaction; how many */
  readonly removeForPrincipal: (developerId: string, principalId: string) => Effect.Effect<number>
  /** what the WebAuthn Signal API needs; undefined without a user handle unless `create` */
  readonly signal: (developerId: string, principalId: string, options: { readonly create: boolean }) => Effect.Effect<SignalInfo | undefined>
  readonly getPolicy: (developerId: string) => Effect.Effect<AttestationPolicy>
  readonly putPolicy: (
    developerId: string,
    input: { readonly attestation?: "none" | "direct" | undefined; readonly allowedAaguids?: ReadonlyArray<string> | null | undefined; readonly requireBackupEligible?: boolean | undefined }
  ) => Effect.Effect<AttestationPolicy, BadRequest | AttestationAnchorsRequired>
  /** assertion options for one pending authorization request of the developer */
  readonly assertionOptions: (developerId: string, authRequestId: string) => Effect.Effect<Options, NotFound | NoCredentials>
  /** verifies the assertion and approves the request it is bound to */
  readonly verifyAssertion: (
    developerId: string,
    input: { readonly challengeId: string; readonly response: unknown },
    /** when given (the public consent page), the challenge must be bound to this request */
    expectedAuthRequestId?: string,
    /** the consent page's SSO sign-in, when the developer enforces SSO (decisions §12) */
    sso?: SsoApproval
  ) => Effect.Effect<AssertionOutcome, AssertionError>
  /**
   * OAuth sign-in (decisions §22.5): usernameless options bound to an authorization request, or,
   * with `principalId`, the second factor offering only that principal's passkeys
   */
  readonly signInOptions: (developerId: string, authRequestId: string, principalId?: string) => Effect.Effect<Options, NoCredentials>
  /** the principal the assertion signs in (user handle and counter checked); approves nothing */
  readonly verifySignIn: (
    developerId: string,
    authRequestId: string,
    input: { readonly challengeId: string; readonly response: unknown }
  ) => Effect.Effect<SignedInWithPasskey, SignInError>
  /** consent page helpers: the developer is the pending request's own */
  readonly assertionOptionsForRequest: (authRequestId: string) => Effect.Effect<Options, NotFound | NoCredentials>
  readonly verifyAssertionForRequest: (
    authRequestId: string,
    input: { readonly challengeId: string; readonly response: unknown },
    sso?: SsoApproval
  ) => Effect.Effect<AssertionOutcome, AssertionError>
}

export interface SignalInfo {
  readonly rpId: string
  readonly userId: string
  readonly allAcceptedCredentialIds: ReadonlyArray<string>
  readonly name: string
  readonly displayName: string
}

export class Passkeys extends Context.Tag("agent-auth/Passkeys")<Passkeys, PasskeysService>() {}

/** the errors a sign-in assertion may answer with */
export type SignInError = InvalidChallenge | PasskeyVerificationFailed | PasskeyCounterRegressed | CredentialNotAllowed | UnknownCredential

/** the errors an assertion may answer with (the approval's own included); anything else is a defect */
export type AssertionError =
  | InvalidChallenge | PasskeyVerificationFailed | PasskeyCounterRegressed | CredentialNotAllowed | UnknownCredential
  | RequestNotPending | ApprovalError

export const PasskeysServiceLive = Layer.effect(
  Passkeys,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const approval = yield* Approval
    const events = yield* Events
    const chain = yield* AuditChain
    const signals = yield* PasskeySignals
    const { rpId, origin } = config.webauthn
    const store = makeCredentialStore(sql)
    const policies = makePolicyStore(sql, config.webauthnTrust)
    yield* configureTrustAnchors(config.webauthnTrust)
    const credentialsOf = store.activeOf
    const notFound = () => new NotFound({ message: "Passkey not found" })

    const { storeChallenge, consumeChallenge } = makeChallenges(sql)
    const assertions = makeAssertionCheck({ sql, origin, rpId, store, chain, signals })
    const { signInOptions, verifySignIn } = makeSignIn({ sql, rpId, store, challenges: { storeChallenge, consumeChallenge }, assertions })
    const { registrationOptions, verifyRegistration } = makeRegistration({ sql, config, events, store, policies, storeChallenge, consumeChallenge })

    const listCredentials: PasskeysService["listCredentials"] = (developerId, principalId, page) => store.page(developerId, principalId, page)

    const getCredential: PasskeysService["getCredential"] = (developerId, id) =>
      Effect.flatMap(store.get(developerId, id), (row) => row === undefined ? Effect.fail(notFound()) : Effect.succeed(credentialView(row)))

    const renameCredential: PasskeysService["renameCredential"] = (developerId, id, deviceName) =>
      Effect.flatMap(store.rename(developerId, id, deviceName), (row) => row === undefined ? Effect.fail(notFound()) : Effect.succeed(credentialView(row)))

    const signal: PasskeysService["signal"] = (developerId, principalId, options) =>
      Effect.gen(function*() {
        const userId = yield* store.userHandle(developerId, principalId, { create: options.create, at: new Date(yield* nowMillis) })
        if (userId === undefined) return undefined
        const active = yield* credentialsOf(developerId, principalId)
        return { rpId, userId, allAcceptedCredentialIds: active.map((c) => c.credentialId), name: principalId, displayName: principalId }
      })

    const getPolicy: PasskeysService["getPolicy"] = (developerId) => policies.get(developerId)
    const putPolicy: PasskeysService["putPolicy"] = (developerId, input) =>
      Effect.flatMap(nowMillis, (ms) => policies.put(developerId, input, new Date(ms)))

    const deleteCredential: PasskeysService["deleteCredential"] = (developerId, id) =>
      sql.withTransaction(Effect.gen(function*() {
        const deleted = yield* store.softDelete(developerId, id, new Date(yield* nowMillis))
        if (!deleted) return yield* Effect.fail(notFound())
        yield* events.emit(developerId, "fido.credential.deleted", { id })
      })).pipe(Effect.catchTag("SqlError", Effect.die))

    const removeForPrincipal: PasskeysService["removeForPrincipal"] = (developerId, principalId) =>
      Effect.gen(function*() {
        const at = new Date(yield* nowMillis)
        const rows = yield* sql<{ id: string }>`UPDATE webauthn_credentials SET deleted_at = ${at}
          WHERE developer_id = ${developerId} AND principal_id = ${principalId} AND deleted_at IS NULL RETURNING id`
        for (const { id } of rows) yield* events.emit(developerId, "fido.credential.deleted", { id })
        return rows.length
      }).pipe(Effect.orDie)

    /** the request when it is pending, unexpired and the developer's */
    const pendingRequest = (authRequestId: string, developerId?: string) =>
      Effect.gen(function*() {
        const request = yield* approval.getPendingRequest(authRequestId).pipe(Effect.orDie)
        if (request === undefined) return undefined
        if (developerId !== undefined && request.developerId !== developerId) return undefined
        if (new Date(request.expiresAt).getTime() <= (yield* nowMillis)) return undefined
        return request
      })

    const optionsFor = (request: PendingRequest) =>
      Effect.gen(function*() {
        const credentials = yield* credentialsOf(request.developerId, request.principalId)
        if (credentials.length === 0) {
          return yield* Effect.fail(new NoCredentials({ message: "The principal has no registered passkey" }))
        }
        const publicKey = yield* Effect.promise(async () =>
          (await webauthn()).generateAuthenticationOptions({
            rpID: rpId,
            allowCredentials: credentials.map((c) => ({ id: c.credentialId, transports: [...c.transports] })),
            userVerification: "required",
            timeout: CHALLENGE_TTL_MS
          })
        )
        const challengeId = yield* storeChallenge({
          developerId: request.developerId,
          kind: "authentication",
          challenge: publicKey.challenge,
          principalId: request.principalId,
          authRequestId: request.id
        })
        return { challengeId, publicKey: publicKey as unknown as Record<string, unknown> }
      })

    const noPendingRequest = () => new NotFound({ message: "No pending authorization request with this id" })

    const assertionOptions: PasskeysService["assertionOptions"] = (developerId, authRequestId) =>
      Effect.gen(function*() {
        const request = yield* pendingRequest(authRequestId, developerId)
        if (request === undefined) return yield* Effect.fail(noPendingRequest())
        return yield* optionsFor(request)
      })

    const assertionOptionsForRequest: PasskeysService["assertionOptionsForRequest"] = (authRequestId) =>
      Effect.gen(function*() {
        const request = yield* pendingRequest(authRequestId)
        if (request === undefined) return yield* Effect.fail(noPendingRequest())
        return yield* optionsFor(request)
      })

    const verifyAssertion: PasskeysService["verifyAssertion"] = (developerId, input, expectedAuthRequestId, sso) =>
      Effect.gen(function*() {
        const challenge = yield* consumeChallenge(developerId, input.challengeId, "authentication")
        if (challenge === undefined || challenge.authRequestId === null) return yield* Effect.fail(invalidChallenge())
        if (expectedAuthRequestId !== undefined && challenge.authRequestId !== expectedAuthRequestId) {
          return yield* Effect.fail(invalidChallenge())
        }
        const request = yield* pendingRequest(challenge.authRequestId, developerId)
        if (request === undefined) {
          return yield* Effect.fail(new RequestNotPending({ message: "The authorization request is no longer pending" }))
        }
        const checked = yield* assertions.check(
          developerId,
          { challenge: challenge.challenge, response: input.response, authRequestId: challenge.authRequestId },
          (credential) => Effect.succeed(credential.principalId === request.principalId && credential.principalId === challenge.principalId)
        )
        const { credential, response, info } = checked
        const assertedAt = new Date(yield* nowMillis)
        const approved = yield* sql.withTransaction(Effect.gen(function*() {
          yield* assertions.advance(checked, assertedAt)
          const approved = yield* approval.approveRequest(challenge.authRequestId!, { fidoVerified: true, sso: Effect.succeed(sso) })
          yield* events.emit(developerId, "fido.assertion", { id: credential.id, authRequestId: challenge.authRequestId, grantId: approved.grantId })
          return approved
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return {
          verified: true as const,
          grantId: approved.grantId,
          code: approved.code,
          redirectUri: approved.redirectUri ?? null,
          state: approved.state ?? null,
          fidoEvidence: {
            credentialId: credential.credentialId,
            authenticatorType: authenticatorType(response.authenticatorAttachment ?? credential.authenticatorAttachment, info.credentialDeviceType),
            userVerified: info.userVerified,
            assertedAt: assertedAt.toISOString()
          }
        }
      })

    const verifyAssertionForRequest: PasskeysService["verifyAssertionForRequest"] = (authRequestId, input, sso) =>
      Effect.flatMap(pendingRequest(authRequestId), (request) =>
        request === undefined
          ? Effect.fail(new RequestNotPending({ message: "The authorization request is no longer pending" }))
          : verifyAssertion(request.developerId, input, authRequestId, sso))

    return {
      registrationOptions,
      verifyRegistration,
      listCredentials,
      getCredential,
      renameCredential,
      deleteCredential,
      removeForPrincipal,
      signal,
      getPolicy,
      putPolicy,
      assertionOptions,
      verifyAssertion,
      signInOptions,
      verifySignIn,
      assertionOptionsForRequest,
      verifyAssertionForRequest
    }
  })
)

/** The capability's services, provided to its handlers and to other capabilities. */
/** needs its Approval port, which authorization provides (src/authorization/PasskeyApproval.ts), composed in src/Server.ts */
export const PasskeysLive = PasskeysServiceLive
