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
 */
import { SqlClient, type SqlError } from "@effect/sql"
import {
  type AuthenticationResponseJSON,
  generateAuthenticationOptions,
  generateRegistrationOptions,
  type RegistrationResponseJSON,
  verifyAuthenticationResponse,
  verifyRegistrationResponse
} from "@simplewebauthn/server"
import { Context, Effect, Layer } from "effect"
import { createHash } from "node:crypto"
import { Config } from "../Config.ts"
import { Conflict, CredentialNotAllowed, InvalidChallenge, NoCredentials, NotFound, PasskeyVerificationFailed, RequestNotPending } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { Approval, ApprovalLive, type ApprovalError, type PendingRequest } from "./Approval.ts"

export const CHALLENGE_TTL_MS = 5 * 60 * 1000

interface CredentialRow {
  readonly id: string
  readonly developerId: string
  readonly principalId: string
  readonly credentialId: string
  readonly publicKey: string
  readonly counter: string
  readonly transports: ReadonlyArray<string>
  readonly deviceType: string
  readonly backedUp: boolean
  readonly authenticatorAttachment: string | null
  readonly deviceName: string | null
  readonly createdAt: Date
  readonly lastUsedAt: Date | null
}

interface ChallengeRow {
  readonly id: string
  readonly developerId: string
  readonly kind: "registration" | "authentication"
  readonly challenge: string
  readonly principalId: string
  readonly authRequestId: string | null
}

const authenticatorType = (attachment: string | null | undefined, deviceType: string) => attachment ?? deviceType

export const credentialView = (c: CredentialRow) => ({
  id: c.id,
  credentialId: c.credentialId,
  principalId: c.principalId,
  deviceName: c.deviceName,
  authenticatorType: authenticatorType(c.authenticatorAttachment, c.deviceType),
  deviceType: c.deviceType,
  backedUp: c.backedUp,
  transports: [...c.transports],
  createdAt: c.createdAt.toISOString(),
  lastUsedAt: c.lastUsedAt?.toISOString() ?? null
})

type CredentialView = ReturnType<typeof credentialView>
type Options = { challengeId: string; publicKey: Record<string, unknown> }

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
  readonly registrationOptions: (developerId: string, principalId: string) => Effect.Effect<Options>
  readonly verifyRegistration: (
    developerId: string,
    input: { readonly challengeId: string; readonly response: unknown; readonly deviceName?: string | undefined }
  ) => Effect.Effect<CredentialView, InvalidChallenge | PasskeyVerificationFailed | Conflict>
  readonly listCredentials: (developerId: string, principalId: string) => Effect.Effect<{ credentials: Array<CredentialView> }>
  readonly deleteCredential: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  /** removes every passkey of a principal (SCIM deprovisioning), in the caller's transaction; how many */
  readonly removeForPrincipal: (developerId: string, principalId: string) => Effect.Effect<number>
  /** assertion options for one pending authorization request of the developer */
  readonly assertionOptions: (developerId: string, authRequestId: string) => Effect.Effect<Options, NotFound | NoCredentials>
  /** verifies the assertion and approves the request it is bound to */
  readonly verifyAssertion: (
    developerId: string,
    input: { readonly challengeId: string; readonly response: unknown },
    /** when given (the public consent page), the challenge must be bound to this request */
    expectedAuthRequestId?: string
  ) => Effect.Effect<AssertionOutcome, AssertionError>
  /** consent page helpers: the developer is the pending request's own */
  readonly assertionOptionsForRequest: (authRequestId: string) => Effect.Effect<Options, NotFound | NoCredentials>
  readonly verifyAssertionForRequest: (
    authRequestId: string,
    input: { readonly challengeId: string; readonly response: unknown }
  ) => Effect.Effect<AssertionOutcome, AssertionError>
}

export class Passkeys extends Context.Tag("agent-auth/Passkeys")<Passkeys, PasskeysService>() {}

const CREDENTIAL_COLUMNS = `id, developer_id, principal_id, credential_id, public_key, counter::text AS counter, transports,
  device_type, backed_up, authenticator_attachment, device_name, created_at, last_used_at`

const isUniqueViolation = (e: SqlError.SqlError) => (e.cause as { code?: string } | undefined)?.code === "23505"

/** the errors an assertion may answer with (the approval's own included) */
export type AssertionError =
  | InvalidChallenge | PasskeyVerificationFailed | CredentialNotAllowed | RequestNotPending | ApprovalError

const invalidChallenge = () =>
  new InvalidChallenge({ message: "The challenge is unknown, expired or already used; request new options" })
const verificationFailed = (reason: string) => new PasskeyVerificationFailed({ message: `Passkey verification failed: ${reason}` })

/** a stable, opaque WebAuthn user handle per developer and principal (never the raw principal id) */
const userHandle = (developerId: string, principalId: string) =>
  new Uint8Array(createHash("sha256").update(`${developerId}\u0000${principalId}`).digest())

const toBase64Url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url")

export const PasskeysServiceLive = Layer.effect(
  Passkeys,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const approval = yield* Approval
    const { rpId, origin, rpName } = config.webauthn

    const credentialsOf = (developerId: string, principalId: string) =>
      sql.unsafe<CredentialRow>(
        `SELECT ${CREDENTIAL_COLUMNS} FROM webauthn_credentials WHERE developer_id = $1 AND principal_id = $2
         ORDER BY created_at DESC, id DESC`,
        [developerId, principalId]
      ).pipe(Effect.orDie)

    const storeChallenge = (row: Omit<ChallengeRow, "id"> & { readonly userId?: string }) =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const id = newId("wac", ms)
        yield* sql`INSERT INTO webauthn_challenges (id, developer_id, kind, challenge, principal_id, auth_request_id, user_id, expires_at, created_at)
                   VALUES (${id}, ${row.developerId}, ${row.kind}, ${row.challenge}, ${row.principalId}, ${row.authRequestId},
                           ${row.userId ?? null}, ${new Date(ms + CHALLENGE_TTL_MS)}, ${new Date(ms)})`
        // expired challenges are of no use: drop a few at a time so the table stays small
        yield* sql`DELETE FROM webauthn_challenges WHERE id IN (
                     SELECT id FROM webauthn_challenges WHERE expires_at < ${new Date(ms - CHALLENGE_TTL_MS)} LIMIT 100)`
        return id
      }).pipe(Effect.orDie)

    /** marks the challenge used (atomically) and returns it; undefined when it cannot be used */
    const consumeChallenge = (developerId: string, challengeId: string, kind: ChallengeRow["kind"]) =>
      Effect.gen(function*() {
        const at = new Date(yield* nowMillis)
        const rows = yield* sql<ChallengeRow>`
          UPDATE webauthn_challenges SET used_at = ${at}
          WHERE id = ${challengeId} AND developer_id = ${developerId} AND kind = ${kind}
            AND used_at IS NULL AND expires_at > ${at}
          RETURNING id, developer_id, kind, challenge, principal_id, auth_request_id`
        return rows[0]
      }).pipe(Effect.orDie)

    const registrationOptions: PasskeysService["registrationOptions"] = (developerId, principalId) =>
      Effect.gen(function*() {
        const existing = yield* credentialsOf(developerId, principalId)
        const publicKey = yield* Effect.promise(() =>
          generateRegistrationOptions({
            rpName,
            rpID: rpId,
            userName: principalId,
            userID: userHandle(developerId, principalId),
            userDisplayName: principalId,
            timeout: CHALLENGE_TTL_MS,
            attestationType: "none",
            excludeCredentials: existing.map((c) => ({ id: c.credentialId, transports: [...c.transports] })),
            authenticatorSelection: { residentKey: "preferred", userVerification: "required" }
          })
        )
        const challengeId = yield* storeChallenge({
          developerId,
          kind: "registration",
          challenge: publicKey.challenge,
          principalId,
          authRequestId: null,
          userId: publicKey.user.id
        })
        return { challengeId, publicKey: publicKey as unknown as Record<string, unknown> }
      })

    const verifyRegistration: PasskeysService["verifyRegistration"] = (developerId, input) =>
      Effect.gen(function*() {
        const challenge = yield* consumeChallenge(developerId, input.challengeId, "registration")
        if (challenge === undefined) return yield* Effect.fail(invalidChallenge())
        const response = input.response as RegistrationResponseJSON
        const result = yield* Effect.tryPromise({
          try: () =>
            verifyRegistrationResponse({
              response: { ...response, clientExtensionResults: response.clientExtensionResults ?? {} },
              expectedChallenge: challenge.challenge,
              expectedOrigin: origin,
              expectedRPID: rpId,
              requireUserVerification: true
            }),
          catch: (e) => verificationFailed(e instanceof Error ? e.message : "invalid response")
        })
        if (!result.verified) return yield* Effect.fail(verificationFailed("the attestation did not verify"))
        const info = result.registrationInfo
        const ms = yield* nowMillis
        const rows = yield* sql.unsafe<CredentialRow>(
          `INSERT INTO webauthn_credentials (id, developer_id, principal_id, credential_id, public_key, counter, transports,
             device_type, backed_up, authenticator_attachment, aaguid, device_name, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
           RETURNING ${CREDENTIAL_COLUMNS}`,
          [
            newId("pkc", ms), developerId, challenge.principalId, info.credential.id, toBase64Url(info.credential.publicKey),
            info.credential.counter, [...(info.credential.transports ?? response.response.transports ?? [])] as any,
            info.credentialDeviceType, info.credentialBackedUp, response.authenticatorAttachment ?? null, info.aaguid,
            input.deviceName ?? null, new Date(ms)
          ]
        ).pipe(
          Effect.catchIf(isUniqueViolation, () => Effect.fail(new Conflict({ message: "This passkey is already registered" }))),
          Effect.catchTag("SqlError", Effect.die)
        )
        return credentialView(rows[0]!)
      })

    const listCredentials: PasskeysService["listCredentials"] = (developerId, principalId) =>
      Effect.map(credentialsOf(developerId, principalId), (rows) => ({ credentials: rows.map(credentialView) }))

    const deleteCredential: PasskeysService["deleteCredential"] = (developerId, id) =>
      sql`DELETE FROM webauthn_credentials WHERE id = ${id} AND developer_id = ${developerId} RETURNING id`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => rows.length === 0 ? Effect.fail(new NotFound({ message: "Passkey not found" })) : Effect.void)
      )

    const removeForPrincipal: PasskeysService["removeForPrincipal"] = (developerId, principalId) =>
      sql`DELETE FROM webauthn_credentials WHERE developer_id = ${developerId} AND principal_id = ${principalId} RETURNING id`.pipe(
        Effect.map((rows) => rows.length),
        Effect.orDie
      )

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
        const publicKey = yield* Effect.promise(() =>
          generateAuthenticationOptions({
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

    const verifyAssertion: PasskeysService["verifyAssertion"] = (developerId, input, expectedAuthRequestId) =>
      Effect.gen(function*() {
        const challenge = yield* consumeChallenge(developerId, input.challengeId, "authentication")
        if (challenge === undefined || challenge.authRequestId === null) return yield* Effect.fail(invalidChallenge())
        if (expectedAuthRequestId !== undefined && challenge.authRequestId !== expectedAuthRequestId) {
          return yield* Effect.fail(invalidChallenge())
        }
        const response = input.response as AuthenticationResponseJSON
        const credentials = yield* sql.unsafe<CredentialRow>(
          `SELECT ${CREDENTIAL_COLUMNS} FROM webauthn_credentials WHERE developer_id = $1 AND credential_id = $2`,
          [developerId, response.id]
        ).pipe(Effect.orDie)
        const credential = credentials[0]
        const request = yield* pendingRequest(challenge.authRequestId, developerId)
        if (request === undefined) {
          return yield* Effect.fail(new RequestNotPending({ message: "The authorization request is no longer pending" }))
        }
        if (credential === undefined || credential.principalId !== request.principalId || credential.principalId !== challenge.principalId) {
          return yield* Effect.fail(new CredentialNotAllowed({ message: "This passkey is not registered to the request's principal" }))
        }
        const storedCounter = Number(credential.counter)
        const result = yield* Effect.tryPromise({
          try: () =>
            verifyAuthenticationResponse({
              response: { ...response, clientExtensionResults: response.clientExtensionResults ?? {} },
              expectedChallenge: challenge.challenge,
              expectedOrigin: origin,
              expectedRPID: rpId,
              credential: {
                id: credential.credentialId,
                publicKey: new Uint8Array(Buffer.from(credential.publicKey, "base64url")),
                counter: storedCounter,
                transports: [...credential.transports] as any
              },
              requireUserVerification: true
            }),
          catch: (e) => verificationFailed(e instanceof Error ? e.message : "invalid response")
        })
        const info = result.authenticationInfo
        if (!result.verified) return yield* Effect.fail(verificationFailed("the signature does not verify"))
        if (!info.userVerified) return yield* Effect.fail(verificationFailed("user verification is required"))
        const ms = yield* nowMillis
        const assertedAt = new Date(ms)
        const approved = yield* sql.withTransaction(Effect.gen(function*() {
          // compare-and-set: a concurrent assertion that already advanced the counter wins
          const advanced = yield* sql`
            UPDATE webauthn_credentials SET counter = ${info.newCounter}, last_used_at = ${assertedAt}
            WHERE id = ${credential.id} AND counter = ${storedCounter} RETURNING id`
          if (advanced.length === 0) return yield* Effect.fail(verificationFailed("the signature counter did not advance"))
          return yield* approval.approveRequest(challenge.authRequestId!, { fidoVerified: true })
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

    const verifyAssertionForRequest: PasskeysService["verifyAssertionForRequest"] = (authRequestId, input) =>
      Effect.flatMap(pendingRequest(authRequestId), (request) =>
        request === undefined
          ? Effect.fail(new RequestNotPending({ message: "The authorization request is no longer pending" }))
          : verifyAssertion(request.developerId, input, authRequestId))

    return {
      registrationOptions,
      verifyRegistration,
      listCredentials,
      deleteCredential,
      removeForPrincipal,
      assertionOptions,
      verifyAssertion,
      assertionOptionsForRequest,
      verifyAssertionForRequest
    }
  })
)

/** The capability's services, provided to its handlers and to other capabilities. */
export const PasskeysLive = PasskeysServiceLive.pipe(Layer.provide(ApprovalLive))
