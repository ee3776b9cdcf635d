/**
 * The directory's answer to "may this principal be authorized?" (decisions §11), read by
 * authorization, consent approval and bundle creation. A principal the directory does not know is
 * not restricted (developers without SCIM name principals freely); one whose SCIM user is
 * deactivated or deleted, and not provisioned again, is inactive.
 *
 * `describe` is how SSO, policies and anomalies read the directory (never by joining its tables).
 */
import { SqlClient, type Statement } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { PrincipalInactive } from "../platform/Errors.ts"
import { makeCoalescer } from "../platform/Coalesce.ts"
import { makeDirectRead } from "../platform/PgPool.ts"

export interface DirectoryPrincipal {
  readonly scimUserId: string
  readonly principalId: string
  readonly userName: string
  readonly externalId: string | null
  readonly active: boolean
  readonly groups: ReadonlyArray<{ readonly id: string; readonly displayName: string }>
}

export interface DirectoryPrincipalsService {
  /** the live directory user behind a principal, with its groups; undefined when the directory does not know it */
  readonly describe: (developerId: string, principalId: string) => Effect.Effect<DirectoryPrincipal | undefined>
  readonly isInactive: (developerId: string, principalId: string) => Effect.Effect<boolean>
  /**
   * SSO sign-in (decisions §12, revised): the live directory users whose userName or primary email
   * equals `email` (case-insensitively). The caller has checked that the email is verified and in
   * the connection's domains; nothing else (externalId, a NameID) ever finds a user.
   */
  readonly findByVerifiedEmail: (developerId: string, email: string) => Effect.Effect<ReadonlyArray<string>>
  /** fails 403 PRINCIPAL_INACTIVE when the principal is inactive (the user's row read FOR SHARE) */
  readonly requireActive: (developerId: string, principalId: string) => Effect.Effect<void, PrincipalInactive>
  /**
   * The gate's share of its one read (decisions §20): the principal's directory rows read FOR SHARE,
   * as an array of live flags, a fragment the gate selects beside its own columns; `refuseIfInactive`
   * judges what it read as `requireActive` does.
   */
  readonly lockedLiveFlags: (developerId: string, principalId: string) => Statement.Fragment
  readonly refuseIfInactive: (liveFlags: ReadonlyArray<boolean>) => Effect.Effect<void, PrincipalInactive>
  /** as requireActive, without a lock: for points that make nothing (vault exchange, token verify) */
  readonly requireActiveNow: (developerId: string, principalId: string) => Effect.Effect<void, PrincipalInactive>
  /** For the compliance summary: users in the directory, and those deprovisioned (inactive or deleted). */
  readonly counts: (developerId: string) => Effect.Effect<{ readonly users: number; readonly deprovisioned: number }>
}

export class DirectoryPrincipals extends Context.Tag("agent-auth/DirectoryPrincipals")<DirectoryPrincipals, DirectoryPrincipalsService>() {}

export const DirectoryPrincipalsLive = Layer.effect(
  DirectoryPrincipals,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    // FOR SHARE (decisions §20): inside the transaction that makes a grant, a deprovisioning that
    // holds the user's row is waited for and then seen; one that comes later waits for the grant and
    // revokes it. Outside a transaction the lock ends with the statement.
    const lockedLiveFlags = (developerId: string, principalId: string) =>
      sql`ARRAY(SELECT active AND deleted_at IS NULL FROM scim_users
                WHERE developer_id = ${developerId} AND principal_id = ${principalId} FOR SHARE)`
    const inactiveOf = (liveFlags: ReadonlyArray<boolean>) => liveFlags.length > 0 && !liveFlags.some((live) => live)
    const isInactive = (developerId: string, principalId: string) =>
      sql<{ liveFlags: Array<boolean> }>`SELECT ${lockedLiveFlags(developerId, principalId)} AS live_flags`.pipe(
        Effect.map((rows) => inactiveOf(rows[0]?.liveFlags ?? [])),
        Effect.orDie
      )
    // outside a transaction (a token check, a vault exchange: the hottest reads there are), concurrent
    // checks share one statement, straight through the pool (platform/Coalesce.ts)
    const read = yield* makeDirectRead
    const inactiveNow = makeCoalescer<{ readonly developerId: string; readonly principalId: string }, boolean>(
      (keys) =>
        read<{ i: number; users: number; live: boolean | null }>(
          `SELECT k.i, count(u.id)::int AS users, bool_or(u.active AND u.deleted_at IS NULL) AS live
             FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(developer_id, principal_id, i)
             LEFT JOIN scim_users u ON u.developer_id = k.developer_id AND u.principal_id = k.principal_id
            GROUP BY k.i`,
          [keys.map((k) => k.developerId), keys.map((k) => k.principalId)]
        ).pipe(
          Effect.map((rows) => {
            const byIndex = new Map(rows.map((r) => [Number(r.i), r.users > 0 && r.live !== true]))
            return keys.map((_, i) => byIndex.get(i + 1) ?? false)
          }),
          Effect.orDie
        ),
      { parallel: 4 }
    )
    const refuseInactive = (inactive: boolean) =>
      inactive ? Effect.fail(new PrincipalInactive({ message: "The principal is deactivated in the directory" })) : Effect.void
    const requireActive = (developerId: string, principalId: string) => Effect.flatMap(isInactive(developerId, principalId), refuseInactive)
    const refuseIfInactive = (liveFlags: ReadonlyArray<boolean>) => refuseInactive(inactiveOf(liveFlags))
    const requireActiveNow = (developerId: string, principalId: string) => Effect.flatMap(inactiveNow({ developerId, principalId }), refuseInactive)
    const describe: DirectoryPrincipalsService["describe"] = (developerId, principalId) =>
      Effect.gen(function*() {
        const [user] = yield* sql<{ id: string; userName: string; externalId: string | null; active: boolean }>`
          SELECT id, user_name, external_id, active FROM scim_users
          WHERE developer_id = ${developerId} AND principal_id = ${principalId} AND deleted_at IS NULL`
        if (user === undefined) return undefined
        const groups = yield* sql<{ id: string; displayName: string }>`
          SELECT g.id, g.display_name FROM scim_group_members m JOIN scim_groups g ON g.id = m.group_id
          WHERE m.user_id = ${user.id} AND g.deleted_at IS NULL ORDER BY g.display_name, g.id LIMIT 1000`
        return { scimUserId: user.id, principalId, userName: user.userName, externalId: user.externalId, active: user.active, groups }
      }).pipe(Effect.orDie)
    const findByVerifiedEmail: DirectoryPrincipalsService["findByVerifiedEmail"] = (developerId, email) =>
      sql<{ principalId: string }>`
        SELECT DISTINCT principal_id FROM scim_users
        WHERE developer_id = ${developerId} AND deleted_at IS NULL
          AND (lower(user_name) = lower(${email}) OR scim_primary_email(resource) = lower(${email}))
        LIMIT 2`.pipe(Effect.map((rows) => rows.map((r) => r.principalId)), Effect.orDie)
    const counts: DirectoryPrincipalsService["counts"] = (developerId) =>
      sql<{ users: string | number; deprovisioned: string | number }>`
        SELECT count(*) FILTER (WHERE deleted_at IS NULL) AS users,
               count(*) FILTER (WHERE deleted_at IS NOT NULL OR NOT active) AS deprovisioned
        FROM scim_users WHERE developer_id = ${developerId}`.pipe(
        Effect.map(([row]) => ({ users: Number(row?.users ?? 0), deprovisioned: Number(row?.deprovisioned ?? 0) })),
        Effect.orDie
      )
    return { describe, isInactive, requireActive, lockedLiveFlags, refuseIfInactive, requireActiveNow, findByVerifiedEmail, counts }
  })
)
