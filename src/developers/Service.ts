/** Developers: sign-up (with the first key), profile and plan changes. Keys: Keys.ts. */
import { SqlClient, SqlError } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { AuditChain } from "../platform/AuditChain.ts"
import { ApiKeys, type Developer } from "../platform/Auth.ts"
import { Conflict } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { now } from "../platform/Time.ts"
import { FIRST_KEY_NAME, insertApiKey, newApiKey } from "./Keys.ts"
import { changePlan } from "./PlanHistory.ts"

export const developerView = (d: Developer) => ({
  developerId: d.id,
  name: d.name,
  email: d.email,
  mode: d.mode,
  plan: d.plan,
  fidoRequired: d.fidoRequired,
  createdAt: new Date(d.createdAt).toISOString()
})

const isUniqueViolation = (e: SqlError.SqlError) => (e.cause as { code?: string } | undefined)?.code === "23505"

export class DevelopersService extends Context.Tag("agent-auth/DevelopersService")<DevelopersService, {
  readonly signup: (input: { name: string; email?: string; mode?: "live" | "sandbox" }) => Effect.Effect<
    { developer: Developer; apiKey: string },
    Conflict
  >
  readonly update: (developer: Developer, patch: { name?: string; fidoRequired?: boolean }) => Effect.Effect<Developer>
  readonly setPlan: (developerId: string, plan: "free" | "pro" | "enterprise") => Effect.Effect<boolean>
}>() {}

export const DevelopersServiceLive = Layer.effect(
  DevelopersService,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const apiKeys = yield* ApiKeys
    const audit = yield* AuditChain
    return {
      signup: (input) =>
        Effect.gen(function*() {
          const at = yield* now
          const mode = input.mode ?? "live"
          const apiKey = newApiKey(mode)
          const id = newId("dev", at.getTime())
          const email = input.email?.toLowerCase() ?? null
          // the developer and its first full key together, or neither
          const rows = yield* sql.withTransaction(Effect.gen(function*() {
            const rows = yield* sql<Developer>`
              INSERT INTO developers (id, name, email, mode, plan, fido_required, created_at, updated_at)
              VALUES (${id}, ${input.name}, ${email}, ${mode}, 'free', false, ${at}, ${at})
              RETURNING id, name, email, mode, plan, fido_required, created_at`
            yield* insertApiKey(sql, { developerId: id, name: FIRST_KEY_NAME, scope: "full", apiKey, at })
            return rows
          })).pipe(
            Effect.catchIf(isUniqueViolation, () => Effect.fail(new Conflict({ message: "A developer with this email already exists" }))),
            Effect.catchTag("SqlError", Effect.die)
          )
          return { developer: rows[0]!, apiKey }
        }),
      update: (developer, patch) =>
        sql.withTransaction(Effect.gen(function*() {
          const at = yield* now
          // the stored values, not the cached developer's: they decide which settings this call changes
          const [before] = yield* sql<{ name: string; fidoRequired: boolean }>`
            SELECT name, fido_required FROM developers WHERE id = ${developer.id} FOR UPDATE`
          const rows = yield* sql<Developer>`
            UPDATE developers SET name = COALESCE(${patch.name ?? null}, name),
              fido_required = COALESCE(${patch.fidoRequired ?? null}, fido_required), updated_at = ${at}
            WHERE id = ${developer.id}
            RETURNING id, name, email, mode, plan, fido_required, created_at`
          const after = rows[0]!
          const changedFields = [
            ...(before !== undefined && after.name !== before.name ? ["name"] : []),
            ...(before !== undefined && after.fidoRequired !== before.fidoRequired ? ["fidoRequired"] : [])
          ]
          // decisions §19: a setting change leaves a trace in the chain (names only; fidoRequired's new
          // value too, as turning the passkey requirement off is what an audit looks for)
          if (changedFields.length > 0) {
            yield* audit.append({
              developerId: developer.id,
              action: "service.developer.settings_changed",
              metadata: {
                changedFields,
                ...(changedFields.includes("fidoRequired") ? { fidoRequired: after.fidoRequired } : {})
              }
            })
          }
          apiKeys.forget(developer.id)
          return after
        })).pipe(Effect.orDie),
      setPlan: (developerId, plan) =>
        Effect.gen(function*() {
          const changed = yield* changePlan(developerId, plan, yield* now).pipe(Effect.provideService(SqlClient.SqlClient, sql))
          apiKeys.forget(developerId)
          return changed
        }).pipe(Effect.orDie)
    }
  })
)
