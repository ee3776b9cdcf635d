/**
 * The one revocation path (decisions §3, §14, §18, §19): each grant tree locked, revoked with its
 * tokens, its credentials' status bits, its consent bundles and their events, in one transaction.
 *
 * It sits below the anomaly core so that an enforce-mode response revokes through the same path as
 * everyone else without the core depending on the grants service (which calls the core). The grants
 * service adds the mass-revocation signal (AD-006) for every other caller; a response's own
 * revocations are therefore never counted as one.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Credentials } from "../credentials/Service.ts"
import { inTransaction } from "../platform/AuditChain.ts"
import { Events } from "../platform/Events.ts"
import { Metrics } from "../platform/Metrics.ts"
import { nowMillis } from "../platform/Time.ts"

export interface Revoked {
  /** every grant of the trees (roots and descendants), or undefined when none is the developer's */
  readonly ids: ReadonlyArray<string> | undefined
  /** the grants this call revoked (they were active) */
  readonly revokedNow: ReadonlyArray<string>
}

export interface RevocationPathService {
  /** revokes the trees rooted at `grantIds` (another developer's grants are skipped), in slices of 500 */
  readonly revokeTrees: (developerId: string, grantIds: ReadonlyArray<string>) => Effect.Effect<Revoked>
}

export class RevocationPath extends Context.Tag("agent-auth/RevocationPath")<RevocationPath, RevocationPathService>() {}

/** no statement carries more ids than a query may have parameters */
const SLICE = 500

export const RevocationPathLive = Layer.effect(
  RevocationPath,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    const credentials = yield* Credentials
    const metrics = yield* Metrics

    const readTree = (developerId: string, grantIds: ReadonlyArray<string>) =>
      sql<{ id: string; parentGrantId: string | null; status: string }>`
        WITH RECURSIVE tree AS (
          SELECT id, parent_grant_id, status FROM grants WHERE id IN ${sql.in(grantIds)} AND developer_id = ${developerId}
          UNION ALL
          SELECT g.id, g.parent_grant_id, g.status FROM grants g JOIN tree t ON g.parent_grant_id = t.id
        )
        SELECT id, parent_grant_id, status FROM tree`

    const revokeSlice = (developerId: string, grantIds: ReadonlyArray<string>) =>
      Effect.gen(function*() {
        const at = new Date(yield* nowMillis)
        // Lock the whole tree (root and every descendant) before changing it. A delegation commits its
        // child while holding its parent's lock, so once every grant read is locked no child can be
        // added under them; the tree is read again until no new one appears.
        let tree = yield* readTree(developerId, grantIds)
        if (tree.length === 0) return { ids: undefined, revokedNow: [] }
        for (let locked = 0; tree.length > locked;) {
          const ids = tree.map((g) => g.id)
          // A consent bundle's row is locked before its grant's, the order bundle revoke takes them in.
          yield* sql`SELECT id FROM consent_bundles WHERE grant_id IN ${sql.in(ids)} ORDER BY id FOR UPDATE`
          yield* sql`SELECT id FROM grants WHERE id IN ${sql.in(ids)} ORDER BY id FOR UPDATE`
          locked = ids.length
          tree = yield* readTree(developerId, grantIds)
        }
        const newly = new Set(tree.filter((g) => g.status === "active").map((g) => g.id))
        const revokedNow = [...newly]
        if (revokedNow.length > 0) {
          yield* sql`UPDATE grants SET status = 'revoked', revoked_at = ${at} WHERE id IN ${sql.in(revokedNow)}`
          yield* sql`UPDATE grant_tokens SET revoked_at = ${at} WHERE grant_id IN ${sql.in(revokedNow)} AND revoked_at IS NULL`
          // decisions §18: the credentials' revocation bits flip in this transaction
          yield* credentials.revokeForGrants(developerId, revokedNow, at)
          for (const id of revokedNow) {
            // cascade: descendants were revoked by this call too (not merely present, revoked before)
            const cascade = tree.some((g) => g.parentGrantId === id && newly.has(g.id))
            yield* events.emit(developerId, "grant.revoked", { grantId: id, cascade })
          }
          // A consent bundle whose grant is revoked (DELETE /v1/grants/:id, or a cascade) is revoked
          // with it, so its status, the status filter, refresh and a second revoke all agree.
          const bundles = yield* sql<{ id: string; grantId: string }>`
            UPDATE consent_bundles SET status = 'revoked', revoked_at = ${at}, updated_at = ${at}
            WHERE grant_id IN ${sql.in(revokedNow)} AND status = 'active' RETURNING id, grant_id`
          for (const bundle of bundles) {
            yield* events.emit(developerId, "consent_bundle.revoked", { bundleId: bundle.id, grantId: bundle.grantId, revokedAt: at.toISOString() })
          }
        }
        return { ids: tree.map((g) => g.id), revokedNow }
      })

    const revokeTrees: RevocationPathService["revokeTrees"] = (developerId, grantIds) =>
      grantIds.length === 0
        ? Effect.succeed({ ids: undefined, revokedNow: [] })
        : inTransaction(sql, Effect.gen(function*() {
          let ids: Array<string> | undefined
          const revokedNow: Array<string> = []
          for (let i = 0; i < grantIds.length; i += SLICE) {
            const slice = yield* revokeSlice(developerId, grantIds.slice(i, i + SLICE))
            if (slice.ids !== undefined) (ids ??= []).push(...slice.ids)
            revokedNow.push(...slice.revokedNow)
          }
          return { ids, revokedNow }
        })).pipe(
          Effect.orDie,
          // counted once the revoking transaction (or savepoint) committed
          Effect.tap(({ revokedNow }) => {
            if (revokedNow.length > 0) metrics.inc("grants_revoked_total", undefined, revokedNow.length)
          })
        )

    return { revokeTrees }
  })
)
