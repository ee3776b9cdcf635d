/**
 * Decrypting a stored credential and refreshing its expired access token under a lease, one refresh
 * per credential at a time (on this instance and across instances). Separate from the exchange so
 * that reads as its checks in order; the lease and the in-flight map are this file's alone.
 */
import { Deferred, Effect, FiberId } from "effect"
import { randomUUID } from "node:crypto"
import type { AppConfig } from "../Config.ts"
import { CredentialUnreadable, NotFound, type UpstreamRefreshFailed } from "../platform/Errors.ts"
import { nowMillis } from "../platform/Time.ts"
import { type Keyring, openSecrets, type SealContext, sealSecrets, type Secrets } from "./Crypto.ts"
import type { CredentialRow, makeRepo } from "./Repo.ts"
import { callTokenEndpoint, REFRESH_TIMEOUT_MS } from "./Upstream.ts"

const sealContext = (row: { id: string; developerId: string; principalId: string; service: string }): SealContext => ({
  id: row.id,
  developerId: row.developerId,
  principalId: row.principalId,
  service: row.service
})

/** a refresh lease outlives the upstream call's timeout, so only a crashed refresher's lease runs out */
const REFRESH_LEASE_MS = REFRESH_TIMEOUT_MS + 5_000
const LEASE_POLL = "100 millis"

export const notFound = () => new NotFound({ message: "Credential not found" })

/** Decrypt and refresh for one vault service instance (its in-flight map is per instance). */
export const makeRefresh = (deps: {
  readonly repo: ReturnType<typeof makeRepo>
  readonly ring: Keyring
  readonly config: AppConfig
}) => {
  const { repo, ring, config } = deps

  const unreadable = (row: CredentialRow, reason: string) =>
    Effect.logError("vault credential cannot be decrypted").pipe(
      Effect.annotateLogs({ credentialId: row.id, developerId: row.developerId, keyId: row.keyId, reason }),
      Effect.zipRight(Effect.fail(new CredentialUnreadable({
        code: "CREDENTIAL_UNREADABLE",
        message: "The stored credential cannot be decrypted; store it again"
      })))
    )

  const decrypt = (row: CredentialRow) =>
    openSecrets(ring, sealContext(row), row).pipe(Effect.catchTag("VaultDecryptError", (e) => unreadable(row, e.reason)))

  const isExpired = (row: CredentialRow, ms: number) => row.tokenExpiresAt !== null && row.tokenExpiresAt.getTime() <= ms
  const isRefreshable = (row: CredentialRow) => row.hasRefreshToken && row.tokenEndpoint !== null

  /**
   * Refreshes under a lease (decisions §9; sql/0010): the exchange that claims it calls the token
   * endpoint holding no database connection (a slow upstream must not tie up the pool, nor the one
   * embedded connection), then stores the answer while its lease stands; a failure gives the lease
   * back and keeps the old row. An exchange that finds another's live lease (another instance)
   * looks again every LEASE_POLL until that refresh is stored or the lease runs out. So concurrent
   * exchanges on any number of instances cause one upstream call.
   */
  const refreshUnderLease = (developerId: string, id: string): Effect.Effect<
    { row: CredentialRow; secrets: Secrets; refreshed: boolean },
    NotFound | UpstreamRefreshFailed | CredentialUnreadable
  > =>
    Effect.gen(function*() {
      for (;;) {
        const ms = yield* nowMillis
        const lease = randomUUID()
        const claimed = yield* repo.claimRefresh(developerId, id, new Date(ms), lease, new Date(ms + REFRESH_LEASE_MS))
        if (claimed === undefined) {
          const row = yield* repo.get(developerId, id)
          if (row === undefined) return yield* Effect.fail(notFound())
          if (!isExpired(row, ms) || !isRefreshable(row)) return { row, secrets: yield* decrypt(row), refreshed: false }
          yield* Effect.sleep(LEASE_POLL)
          continue
        }
        const secrets = yield* decrypt(claimed).pipe(Effect.tapError(() => repo.releaseRefresh(id, lease)))
        const answer = yield* callTokenEndpoint(claimed.tokenEndpoint!, secrets, config.webhooks.allowPrivateHosts).pipe(
          Effect.tapError((e) =>
            Effect.zipRight(
              repo.releaseRefresh(id, lease),
              Effect.logWarning("vault upstream refresh failed").pipe(
                Effect.annotateLogs({ credentialId: id, developerId, service: claimed.service, reason: e.message })
              )
            )
          )
        )
        const after = yield* nowMillis
        const fresh: Secrets = { ...secrets, accessToken: answer.accessToken, refreshToken: answer.refreshToken ?? secrets.refreshToken }
        const expiresAt = answer.expiresIn === undefined ? null : new Date(after + answer.expiresIn * 1000)
        const stored = yield* repo.refreshed(id, lease, new Date(after), expiresAt, !!fresh.refreshToken, sealSecrets(ring, sealContext(claimed), fresh))
        if (stored === undefined) {
          // The row was replaced or deleted meanwhile (or the lease ran out): the caller still gets
          // the token it was fetched for; the row keeps what was written after.
          yield* Effect.logWarning("vault upstream refresh not stored: the credential changed meanwhile").pipe(
            Effect.annotateLogs({ credentialId: id, developerId, service: claimed.service })
          )
          const at = new Date(after)
          return { row: { ...claimed, tokenExpiresAt: expiresAt, refreshedAt: at, updatedAt: at }, secrets: fresh, refreshed: true }
        }
        yield* Effect.logInfo("vault upstream token refreshed").pipe(
          Effect.annotateLogs({ credentialId: id, developerId, service: claimed.service })
        )
        return { row: stored, secrets: fresh, refreshed: true }
      }
    }).pipe(Effect.catchTag("SqlError", Effect.die))

  type RefreshResult = Effect.Effect.Success<ReturnType<typeof refreshUnderLease>>
  type RefreshError = Effect.Effect.Error<ReturnType<typeof refreshUnderLease>>
  /** one refresh in flight per credential on this instance; the others wait for its outcome */
  const inflight = new Map<string, Deferred.Deferred<RefreshResult, RefreshError>>()
  const refreshOnce = (developerId: string, id: string) =>
    Effect.suspend(() => {
      const pending = inflight.get(id)
      if (pending !== undefined) return Deferred.await(pending)
      const deferred = Deferred.unsafeMake<RefreshResult, RefreshError>(FiberId.none)
      inflight.set(id, deferred)
      // A daemon, so a caller that goes away does not cancel the refresh the others wait for.
      return Effect.forkDaemon(
        refreshUnderLease(developerId, id).pipe(
          Effect.exit,
          Effect.flatMap((exit) => Deferred.done(deferred, exit)),
          Effect.ensuring(Effect.sync(() => inflight.delete(id)))
        )
      ).pipe(Effect.zipRight(Deferred.await(deferred)))
    })

  return { decrypt, isExpired, isRefreshable, refreshOnce }
}
