/**
 * Operator commands of the binary beyond serve/migrate. Each runs against the configured database
 * and prints its answer. Capabilities register theirs here.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { billingCommands } from "./billing/Commands.ts"
import { Events, EventsLive } from "./platform/Events.ts"
import { changePlan } from "./developers/PlanHistory.ts"
import { FIRST_KEY_NAME, insertApiKey, newApiKey } from "./developers/Keys.ts"
import { newId } from "./platform/Ids.ts"
import type { OperatorCommand } from "./platform/OperatorCommand.ts"
import { nowMillis } from "./platform/Time.ts"
import { rekeyCommand } from "./vault/Rekey.ts"

export type { OperatorCommand }

const dbError = (e: { message: string }) => new Error(`database error: ${e.message}`)
const PLANS = ["free", "pro", "enterprise"]

/** `--name value` / `--name=value` options of a command line */
const options = (args: ReadonlyArray<string>): Record<string, string | undefined> => {
  const out: Record<string, string | undefined> = {}
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (!arg.startsWith("--")) continue
    const eq = arg.indexOf("=")
    if (eq !== -1) out[arg.slice(2, eq)] = arg.slice(eq + 1)
    else out[arg.slice(2)] = args[++i]
  }
  return out
}

interface DeveloperRow {
  readonly id: string
  readonly name: string
  readonly email: string | null
  readonly mode: string
  readonly plan: string
  readonly fidoRequired: boolean
  readonly createdAt: Date
}

const COLUMNS = "id, name, email, mode, plan, fido_required, created_at"

const setPlan: OperatorCommand = ([developerId, plan]) =>
  Effect.gen(function*() {
    if (developerId === undefined || plan === undefined) {
      return yield* Effect.fail(new Error("usage: agent-auth developers set-plan <developerId> <plan>"))
    }
    const sql = yield* SqlClient.SqlClient
    // decisions §16: any plan in the plans table (seeded, or added by PLANS_FILE at the last start)
    const known = yield* sql<{ code: string }>`SELECT code FROM plans ORDER BY code`.pipe(Effect.mapError(dbError))
    if (!known.some((p) => p.code === plan)) {
      return yield* Effect.fail(new Error(`unknown plan "${plan}"; the plans are ${known.map((p) => p.code).join(", ")}`))
    }
    // the change and its billing.subscription.updated event commit together (decisions §16)
    // kept in the plan history with its time, so invoices price each part of the month at its plan
    const changed = yield* sql.withTransaction(Effect.gen(function*() {
      const changed = yield* changePlan(developerId, plan!, new Date(yield* nowMillis))
      if (changed) {
        const events = yield* Events
        yield* events.emit(developerId, "billing.subscription.updated", { plan: plan!, status: "active" })
      }
      return changed
    })).pipe(
      Effect.provide(EventsLive),
      Effect.mapError(dbError)
    )
    if (!changed) return yield* Effect.fail(new Error(`no developer ${developerId}`))
    return `developer ${developerId} is now on the ${plan} plan`
  })

const list: OperatorCommand = (args) =>
  Effect.gen(function*() {
    const raw = options(args).limit ?? "100"
    if (!/^\d{1,4}$/.test(raw) || Number(raw) < 1 || Number(raw) > 1000) {
      return yield* Effect.fail(new Error("usage: agent-auth developers list [--limit 1-1000]"))
    }
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<DeveloperRow>`SELECT ${sql.unsafe(COLUMNS)} FROM developers ORDER BY created_at DESC, id DESC LIMIT ${Number(raw)}`.pipe(
      Effect.mapError(dbError)
    )
    if (rows.length === 0) return "no developers"
    const table = [["ID", "EMAIL", "PLAN", "MODE", "CREATED", "NAME"], ...rows.map((d) => [d.id, d.email ?? "-", d.plan, d.mode, d.createdAt.toISOString(), d.name])]
    const widths = table[0]!.map((_, i) => Math.max(...table.map((r) => r[i]!.length)))
    return table.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join("  ")).join("\n")
  })

const show: OperatorCommand = ([idOrEmail]) =>
  Effect.gen(function*() {
    if (idOrEmail === undefined) return yield* Effect.fail(new Error("usage: agent-auth developers show <developerId|email>"))
    const sql = yield* SqlClient.SqlClient
    const rows = yield* (idOrEmail.includes("@")
      ? sql<DeveloperRow>`SELECT ${sql.unsafe(COLUMNS)} FROM developers WHERE email = ${idOrEmail.toLowerCase()}`
      : sql<DeveloperRow>`SELECT ${sql.unsafe(COLUMNS)} FROM developers WHERE id = ${idOrEmail}`).pipe(Effect.mapError(dbError))
    const d = rows[0]
    if (d === undefined) return yield* Effect.fail(new Error(`no developer ${idOrEmail}`))
    const [agents] = yield* sql<{ n: string }>`SELECT count(*) AS n FROM agents WHERE developer_id = ${d.id}`.pipe(Effect.mapError(dbError))
    return [
      `id:           ${d.id}`,
      `name:         ${d.name}`,
      `email:        ${d.email ?? "-"}`,
      `plan:         ${d.plan}`,
      `mode:         ${d.mode}`,
      `fidoRequired: ${d.fidoRequired}`,
      `createdAt:    ${d.createdAt.toISOString()}`,
      `agents:       ${agents?.n ?? 0}`
    ].join("\n")
  })

const EMAIL = /^[^\s@]+@[^\s@]+\.[^\s@]+$/

const create: OperatorCommand = (args) =>
  Effect.gen(function*() {
    const o = options(args)
    const usage = "usage: agent-auth developers create --name <name> --email <email> [--plan free|pro|enterprise] [--mode live|sandbox]"
    const name = o.name?.trim()
    const email = o.email?.trim().toLowerCase()
    const plan = o.plan ?? "free"
    const mode = o.mode ?? "live"
    if (!name || name.length > 200 || !email || email.length > 320 || !EMAIL.test(email) || !PLANS.includes(plan) || !["live", "sandbox"].includes(mode)) {
      return yield* Effect.fail(new Error(usage))
    }
    const sql = yield* SqlClient.SqlClient
    const apiKey = newApiKey(mode as "live" | "sandbox")
    const id = newId("dev")
    const at = new Date()
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* sql`INSERT INTO developers (id, name, email, mode, plan, fido_required, created_at, updated_at)
                 VALUES (${id}, ${name}, ${email}, ${mode}, ${plan}, false, ${at}, ${at})`
      yield* insertApiKey(sql, { developerId: id, name: FIRST_KEY_NAME, scope: "full", apiKey, at })
    })).pipe(
      Effect.mapError((e) =>
        /unique|duplicate/i.test(String((e.cause as { message?: string })?.message ?? e.message))
          ? new Error(`a developer with the email ${email} already exists`)
          : dbError(e)
      )
    )
    // the key is shown this once: only its hash is stored
    return `developer ${id} created (${plan} plan)\napiKey: ${apiKey}\nStore the key now: it is not shown again (agent-auth cannot recover it).`
  })

export const operatorCommands: Record<string, OperatorCommand> = {
  "developers list": list,
  "developers show": show,
  "developers create": create,
  "developers set-plan": setPlan,
  "vault rekey": rekeyCommand,
  "billing set-plan": setPlan,
  ...billingCommands
}
