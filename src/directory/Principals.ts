/**
 * The directory's answer to "may this principal be authorized?" (decisions §11), read by
 * authorization, consent approval and bundle creation. A principal the directory does not know is
 * not restricted (developers without SCIM name principals freely); one whose SCIM user is
 * deactivated or deleted, and not provisioned again, is inactive.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { err, type Forbidden } from "../platform/Errors.ts"

export interface PrincipalsService {
  readonly isInactive: (developerId: string, principalId: string) => Effect.Effect<boolean>
  /** fails 403 PRINCIPAL_INACTIVE when the principal is inactive */
  readonly requireActive: (developerId: string, principalId: string) => Effect.Effect<void, Forbidden>
}

export class Principals extends Context.Tag("agent-auth/Principals")<Principals, PrincipalsService>() {}

export const PrincipalsLive = Layer.effect(
  Principals,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const isInactive = (developerId: string, principalId: string) =>
      sql<{ anyActive: boolean | null }>`
        SELECT bool_or(active AND deleted_at IS NULL) AS any_active FROM scim_users
        WHERE developer_id = ${developerId} AND principal_id = ${principalId}`.pipe(
        Effect.map((rows) => rows[0]?.anyActive === false),
        Effect.orDie
      )
    const requireActive = (developerId: string, principalId: string) =>
      Effect.flatMap(isInactive(developerId, principalId), (inactive) =>
        inactive ? Effect.fail(err.forbidden("PRINCIPAL_INACTIVE", "The principal is deactivated in the directory")) : Effect.void)
    return { isInactive, requireActive }
  })
)
