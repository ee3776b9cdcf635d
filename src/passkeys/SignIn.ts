/**
 * Signing a person in with a passkey (decisions §22.5, OAuth authorization endpoint): unlike the
 * consent approval, nobody has named the principal yet. The options are usernameless (empty
 * allowCredentials, user verification required) and the challenge is bound to the authorization
 * request only; the assertion's user handle (random per developer and principal, decisions §17)
 * must be the one stored for the credential's principal, which is who signed in. The second-factor
 * form (`fidoRequired` after another method) names the principal: only their passkeys are offered
 * and accepted. Nothing is approved here: the caller goes on to the gate and the consent page.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { NoCredentials } from "../platform/Errors.ts"
import { nowMillis } from "../platform/Time.ts"
import type { makeAssertionCheck } from "./Assertion.ts"
import { CHALLENGE_TTL_MS, invalidChallenge, type makeChallenges, verificationFailed } from "./Challenges.ts"
import type { makeCredentialStore } from "./Credentials.ts"
import { webauthn } from "./Library.ts"

export interface SignedInWithPasskey {
  readonly principalId: string
  readonly passkeyId: string
  readonly assertedAt: Date
}

export const makeSignIn = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly rpId: string
  readonly store: ReturnType<typeof makeCredentialStore>
  readonly challenges: ReturnType<typeof makeChallenges>
  readonly assertions: ReturnType<typeof makeAssertionCheck>
}) => {
  const { sql, store, challenges, assertions } = deps

  /** `principalId` given: the second factor after another method, offered only that principal's passkeys */
  const signInOptions = (developerId: string, authRequestId: string, principalId?: string) =>
    Effect.gen(function*() {
      const credentials = principalId === undefined ? [] : yield* store.activeOf(developerId, principalId)
      if (principalId !== undefined && credentials.length === 0) {
        return yield* Effect.fail(new NoCredentials({ message: "The principal has no registered passkey" }))
      }
      const publicKey = yield* Effect.promise(async () =>
        (await webauthn()).generateAuthenticationOptions({
          rpID: deps.rpId,
          allowCredentials: credentials.map((c) => ({ id: c.credentialId, transports: [...c.transports] as any })),
          userVerification: "required",
          timeout: CHALLENGE_TTL_MS
        })
      )
      // the empty principal: a usernameless challenge, bound to the request alone
      const challengeId = yield* challenges.storeChallenge({
        developerId, kind: "authentication", challenge: publicKey.challenge, principalId: principalId ?? "", authRequestId
      })
      return { challengeId, publicKey: publicKey as unknown as Record<string, unknown> }
    })

  const verifySignIn = (developerId: string, authRequestId: string, input: { readonly challengeId: string; readonly response: unknown }) =>
    Effect.gen(function*() {
      const challenge = yield* challenges.consumeChallenge(developerId, input.challengeId, "authentication")
      if (challenge === undefined || challenge.authRequestId !== authRequestId) return yield* Effect.fail(invalidChallenge())
      const userHandle = (input.response as { response?: { userHandle?: unknown } } | null)?.response?.userHandle
      if (challenge.principalId === "" && (typeof userHandle !== "string" || userHandle === "")) {
        return yield* Effect.fail(verificationFailed("a usernameless assertion must carry the user handle"))
      }
      const ms = yield* nowMillis
      const checked = yield* assertions.check(
        developerId,
        { challenge: challenge.challenge, response: input.response, authRequestId },
        (credential) =>
          Effect.gen(function*() {
            if (challenge.principalId !== "" && credential.principalId !== challenge.principalId) return false
            if (typeof userHandle !== "string") return true
            // the handle the authenticator stored at registration names the same principal as the credential
            const stored = yield* store.userHandle(developerId, credential.principalId, { create: false, at: new Date(ms) })
            return stored !== undefined && stored === userHandle
          })
      )
      const assertedAt = new Date(ms)
      yield* sql.withTransaction(assertions.advance(checked, assertedAt)).pipe(Effect.catchTag("SqlError", Effect.die))
      return { principalId: checked.credential.principalId, passkeyId: checked.credential.id, assertedAt } satisfies SignedInWithPasskey
    })

  return { signInOptions, verifySignIn }
}
