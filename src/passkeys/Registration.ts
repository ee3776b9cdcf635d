/**
 * The registration ceremony (decisions §9, §17): options for a principal (their random user handle,
 * a discoverable credential, user verification, the developer's attestation preference, their
 * existing passkeys excluded, at most 20), then the verified response stored with its AAGUID,
 * provider name and backup flags once the attestation policy allows it (fido.registered).
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { RegistrationResponseJSON } from "@simplewebauthn/server"
import { Effect } from "effect"
import type { AppConfig } from "../Config.ts"
import { AuthenticatorNotAllowed, Conflict, type InvalidChallenge, type PasskeyVerificationFailed, TooManyCredentials } from "../platform/Errors.ts"
import type { EventsService } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { providerName } from "./Aaguids.ts"
import { webauthn, webauthnHelpers } from "./Library.ts"
import { type makePolicyStore, policyRefusal } from "./Attestation.ts"
import { CHALLENGE_TTL_MS, invalidChallenge, type makeChallenges, verificationFailed } from "./Challenges.ts"
import { CREDENTIAL_COLUMNS, type CredentialRow, type CredentialView, credentialView, type makeCredentialStore, MAX_CREDENTIALS_PER_PRINCIPAL } from "./Credentials.ts"

type Options = { challengeId: string; publicKey: Record<string, unknown> }

const isUniqueViolation = (e: SqlError.SqlError) => (e.cause as { code?: string } | undefined)?.code === "23505"
const toBase64Url = (bytes: Uint8Array) => Buffer.from(bytes).toString("base64url")

export const makeRegistration = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly config: AppConfig
  readonly events: EventsService
  readonly store: ReturnType<typeof makeCredentialStore>
  readonly policies: ReturnType<typeof makePolicyStore>
} & ReturnType<typeof makeChallenges>) => {
  const { sql, config, events, store, policies, storeChallenge, consumeChallenge } = deps
  const { rpId, origin, rpName } = config.webauthn
  const credentialsOf = store.activeOf
  const tooMany = () =>
    new TooManyCredentials({ message: `A principal may hold at most ${MAX_CREDENTIALS_PER_PRINCIPAL} passkeys; delete one first` })

  const registrationOptions: (developerId: string, principalId: string) => Effect.Effect<Options, TooManyCredentials> = (developerId, principalId) =>
    Effect.gen(function*() {
      const existing = yield* credentialsOf(developerId, principalId)
      if (existing.length >= MAX_CREDENTIALS_PER_PRINCIPAL) return yield* Effect.fail(tooMany())
      const policy = yield* policies.get(developerId)
      const handle = yield* store.userHandle(developerId, principalId, { create: true, at: new Date(yield* nowMillis) })
      const publicKey = yield* Effect.promise(async () =>
        (await webauthn()).generateRegistrationOptions({
          rpName,
          rpID: rpId,
          userName: principalId,
          userID: new Uint8Array(Buffer.from(handle!, "base64url")),
          userDisplayName: principalId,
          timeout: CHALLENGE_TTL_MS,
          attestationType: policy.attestation,
          excludeCredentials: existing.map((c) => ({ id: c.credentialId, transports: [...c.transports] })),
          // discoverable credentials: username-less sign-in and the Signal API work on them
          authenticatorSelection: { residentKey: "required", userVerification: "required" }
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

  const verifyRegistration: (
    developerId: string,
    input: { readonly challengeId: string; readonly response: unknown; readonly deviceName?: string | undefined }
  ) => Effect.Effect<CredentialView, InvalidChallenge | PasskeyVerificationFailed | Conflict | TooManyCredentials | AuthenticatorNotAllowed> = (developerId, input) =>
    Effect.gen(function*() {
      const challenge = yield* consumeChallenge(developerId, input.challengeId, "registration")
      if (challenge === undefined) return yield* Effect.fail(invalidChallenge())
      const response = input.response as RegistrationResponseJSON
      const result = yield* Effect.tryPromise({
        try: async () =>
          (await webauthn()).verifyRegistrationResponse({
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
      const backupEligible = info.credentialDeviceType === "multiDevice"
      const refusal = policyRefusal(yield* policies.get(developerId), {
        fmt: info.fmt,
        aaguid: info.aaguid,
        backupEligible,
        chained: yield* attestedByAnchor(info.attestationObject, info.aaguid)
      })
      if (refusal !== undefined) return yield* Effect.fail(new AuthenticatorNotAllowed({ message: `Passkey refused: ${refusal}` }))
      const ms = yield* nowMillis
      const credential = yield* sql.withTransaction(Effect.gen(function*() {
        // the principal's handle row is the lock under which the cap is counted
        yield* store.userHandle(developerId, challenge.principalId, { create: true, lock: true, at: new Date(ms) })
        if ((yield* store.countActive(developerId, challenge.principalId)) >= MAX_CREDENTIALS_PER_PRINCIPAL) {
          return yield* Effect.fail(tooMany())
        }
        const rows = yield* sql.unsafe<CredentialRow>(
          `INSERT INTO webauthn_credentials (id, developer_id, principal_id, credential_id, public_key, counter, transports,
             device_type, backed_up, backup_eligible, authenticator_attachment, aaguid, provider_name, attestation_format,
             device_name, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
           RETURNING ${CREDENTIAL_COLUMNS}`,
          [
            newId("pkc", ms), developerId, challenge.principalId, info.credential.id, toBase64Url(info.credential.publicKey),
            info.credential.counter, [...(info.credential.transports ?? response.response.transports ?? [])] as any,
            info.credentialDeviceType, info.credentialBackedUp, backupEligible, response.authenticatorAttachment ?? null,
            info.aaguid, providerName(info.aaguid), info.fmt, input.deviceName ?? null, new Date(ms)
          ]
        )
        yield* events.emit(developerId, "fido.registered", { id: rows[0]!.id })
        return rows[0]!
      })).pipe(
        Effect.catchTag("SqlError", (e) =>
          isUniqueViolation(e) ? Effect.fail(new Conflict({ message: "This passkey is already registered" })) : Effect.die(e))
      )
      return credentialView(credential)
    })

  /** the registration carried a certificate chain checked against a local anchor */
  const attestedByAnchor = (attestationObject: Uint8Array, aaguid: string) =>
    Effect.promise(async () => {
      const x5c = (await webauthnHelpers()).decodeAttestationObject(new Uint8Array(attestationObject)).get("attStmt").get("x5c")
      if (!Array.isArray(x5c) || x5c.length === 0) return false
      if (config.webauthnTrust.roots.length > 0) return true
      return config.webauthnTrust.statements.length > 0 && (await (await webauthn()).MetadataService.getStatement(aaguid)) !== undefined
    })

  return { registrationOptions, verifyRegistration }
}
