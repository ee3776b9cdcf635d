/**
 * One WebAuthn assertion checked against a stored passkey, shared by the consent approval
 * (./Service.ts) and the OAuth sign-in (./SignIn.ts): the credential must be active for the
 * developer (else UNKNOWN_CREDENTIAL when no developer has it), the signature and user verification
 * must hold, and the signature counter must grow. A genuine signature whose counter did not grow is
 * a cloned authenticator: an entry on the audit chain, an AD-011 signal, 403. `advance` then moves
 * the stored counter with a compare-and-set in the caller's transaction, so two assertions carrying
 * the same counter cannot both pass.
 */
import type { SqlClient } from "@effect/sql"
import type { AuthenticationResponseJSON } from "@simplewebauthn/server"
import { Effect } from "effect"
import type { AuditChainService } from "../platform/AuditChain.ts"
import { CredentialNotAllowed, PasskeyCounterRegressed, UnknownCredential } from "../platform/Errors.ts"
import { verificationFailed } from "./Challenges.ts"
import type { CredentialRow, makeCredentialStore } from "./Credentials.ts"
import { webauthn } from "./Library.ts"
import type { PasskeySignalsService } from "./Signals.ts"

export interface CheckedAssertion {
  readonly credential: CredentialRow
  readonly response: AuthenticationResponseJSON
  readonly info: { readonly newCounter: number; readonly userVerified: boolean; readonly credentialBackedUp: boolean; readonly credentialDeviceType: string }
}

export const makeAssertionCheck = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly origin: string
  readonly rpId: string
  readonly store: ReturnType<typeof makeCredentialStore>
  readonly chain: AuditChainService
  readonly signals: PasskeySignalsService
}) => {
  const { sql, store } = deps

  /** an active credential of any developer carries this id (then it is not "unknown" to the authenticator) */
  const registeredAnywhere = (credentialId: string) =>
    sql`SELECT 1 FROM webauthn_credentials WHERE credential_id = ${credentialId} AND deleted_at IS NULL LIMIT 1`.pipe(
      Effect.map((rows) => rows.length > 0),
      Effect.orDie
    )

  /**
   * `allowed` says whether the credential's principal may answer (the request's principal, the
   * user handle's); `authRequestId` is only for the trace a regression leaves.
   */
  const check = (
    developerId: string,
    input: { readonly challenge: string; readonly response: unknown; readonly authRequestId: string | null },
    allowed: (credential: CredentialRow) => Effect.Effect<boolean>
  ) =>
    Effect.gen(function*() {
      const response = input.response as AuthenticationResponseJSON
      if (typeof response?.id !== "string") return yield* Effect.fail(verificationFailed("invalid response"))
      const credential = yield* store.byCredentialId(developerId, response.id)
      if (credential === undefined && !(yield* registeredAnywhere(response.id))) {
        // deleted or never registered: the page may tell the authenticator (signalUnknownCredential)
        return yield* Effect.fail(new UnknownCredential({ message: "This passkey is not registered (or was deleted)" }))
      }
      if (credential === undefined || !(yield* allowed(credential))) {
        return yield* Effect.fail(new CredentialNotAllowed({ message: "This passkey is not registered to the request's principal" }))
      }
      const storedCounter = Number(credential.counter)
      const result = yield* Effect.tryPromise({
        try: async () =>
          (await webauthn()).verifyAuthenticationResponse({
            response: { ...response, clientExtensionResults: response.clientExtensionResults ?? {} },
            expectedChallenge: input.challenge,
            expectedOrigin: deps.origin,
            expectedRPID: deps.rpId,
            credential: {
              id: credential.credentialId,
              publicKey: new Uint8Array(Buffer.from(credential.publicKey, "base64url")),
              // the counter is compared below, once the signature is known to be genuine
              counter: 0,
              transports: [...credential.transports] as any
            },
            requireUserVerification: true
          }),
        catch: (e) => verificationFailed(e instanceof Error ? e.message : "invalid response")
      })
      const info = result.authenticationInfo
      if (!result.verified) return yield* Effect.fail(verificationFailed("the signature does not verify"))
      if (!info.userVerified) return yield* Effect.fail(verificationFailed("user verification is required"))
      if ((info.newCounter > 0 || storedCounter > 0) && info.newCounter <= storedCounter) {
        // a genuine signature with a counter that did not grow: a cloned authenticator
        yield* deps.chain.append({
          developerId,
          action: "service.passkey.counter_regression",
          principalId: credential.principalId,
          metadata: { passkeyId: credential.id, storedCounter, presentedCounter: info.newCounter, authRequestId: input.authRequestId }
        })
        yield* deps.signals.counterRegressed({
          developerId, principalId: credential.principalId, passkeyId: credential.id, storedCounter,
          presentedCounter: info.newCounter, authRequestId: input.authRequestId
        })
        return yield* Effect.fail(new PasskeyCounterRegressed({ message: "Passkey verification failed: the signature counter went backwards (a cloned authenticator?)" }))
      }
      return { credential, response, info } satisfies CheckedAssertion
    })

  /** compare-and-set of the counter, in the caller's transaction: a concurrent assertion that already advanced it wins */
  const advance = (checked: CheckedAssertion, at: Date) =>
    Effect.gen(function*() {
      const advanced = yield* sql`
        UPDATE webauthn_credentials SET counter = ${checked.info.newCounter}, last_used_at = ${at}, use_count = use_count + 1,
          backed_up = ${checked.info.credentialBackedUp}
        WHERE id = ${checked.credential.id} AND counter = ${Number(checked.credential.counter)} AND deleted_at IS NULL RETURNING id`
      if (advanced.length === 0) return yield* Effect.fail(verificationFailed("the signature counter did not advance"))
    })

  return { check, advance }
}
