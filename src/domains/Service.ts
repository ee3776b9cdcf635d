/**
 * Custom domains. A developer adds a name, publishes `agent-auth-verify=<token>` as a TXT record at
 * `_agent-auth.<name>`, then asks for verification. One domain belongs to one developer: a name can
 * be verified by only one developer (unique index), and a name verified by someone else cannot be
 * added. Unverified claims do not block anyone, so nobody can squat a name they do not control.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { randomBytes } from "node:crypto"
import { Config } from "../Config.ts"
import { BadRequest, Conflict, DnsUnavailable, DomainVerificationFailed, NotFound } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { lookupTxt } from "./Dns.ts"
import { challengeName, challengeValue, normaliseDomain } from "./Name.ts"

interface DomainRow {
  readonly id: string
  readonly developerId: string
  readonly domain: string
  readonly verificationToken: string
  readonly verifiedAt: Date | null
  readonly createdAt: Date
}

export const domainView = (d: DomainRow) => ({
  id: d.id,
  domain: d.domain,
  verified: d.verifiedAt !== null,
  verifiedAt: d.verifiedAt?.toISOString() ?? null,
  createdAt: d.createdAt.toISOString()
})

type DomainView = ReturnType<typeof domainView>

export interface DomainsService {
  readonly list: (developerId: string) => Effect.Effect<{ domains: Array<DomainView> }>
  readonly create: (developerId: string, domain: string) => Effect.Effect<
    DomainView & {
      verificationToken: string
      instructions: string
      verificationRecord: { type: "TXT"; name: string; value: string }
    },
    BadRequest | Conflict
  >
  readonly verify: (developerId: string, id: string) => Effect.Effect<DomainView, NotFound | Conflict | DomainVerificationFailed | DnsUnavailable>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  /** the developer's verified domains (for other capabilities, e.g. redirect URI checks) */
  readonly verifiedDomains: (developerId: string) => Effect.Effect<ReadonlyArray<string>>
}

export class Domains extends Context.Tag("agent-auth/Domains")<Domains, DomainsService>() {}

const COLUMNS = "id, developer_id, domain, verification_token, verified_at, created_at"
const isUniqueViolation = (e: SqlError.SqlError) => (e.cause as { code?: string } | undefined)?.code === "23505"
const notFound = () => new NotFound({ message: "Domain not found" })

export const DomainsServiceLive = Layer.effect(
  Domains,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config

    const list: DomainsService["list"] = (developerId) =>
      sql.unsafe<DomainRow>(
        `SELECT ${COLUMNS} FROM domains WHERE developer_id = $1 ORDER BY created_at DESC, id DESC`,
        [developerId]
      ).pipe(Effect.map((rows) => ({ domains: rows.map(domainView) })), Effect.orDie)

    const create: DomainsService["create"] = (developerId, input) =>
      Effect.gen(function*() {
        const normalised = normaliseDomain(input)
        if (!normalised.ok) {
          return yield* Effect.fail(new BadRequest({ message: normalised.reason, details: [{ path: "domain", message: normalised.reason }] }))
        }
        const domain = normalised.domain
        const taken = yield* sql`SELECT 1 FROM domains WHERE domain = ${domain} AND verified_at IS NOT NULL AND developer_id <> ${developerId}`
        if (taken.length > 0) return yield* Effect.fail(new Conflict({ message: "This domain is verified by another account" }))
        const ms = yield* nowMillis
        const token = randomBytes(24).toString("base64url")
        const rows = yield* sql.unsafe<DomainRow>(
          `INSERT INTO domains (id, developer_id, domain, verification_token, created_at)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (developer_id, domain) DO NOTHING
           RETURNING ${COLUMNS}`,
          [newId("dom", ms), developerId, domain, token, new Date(ms)]
        )
        if (rows.length === 0) return yield* Effect.fail(new Conflict({ message: "This domain is already added" }))
        const row = rows[0]!
        const name = challengeName(domain)
        const value = challengeValue(token)
        return {
          ...domainView(row),
          verificationToken: token,
          instructions: `Create a DNS TXT record at ${name} with the value "${value}", then call POST /v1/domains/${row.id}/verify.`,
          verificationRecord: { type: "TXT" as const, name, value }
        }
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    const find = (developerId: string, id: string) =>
      sql.unsafe<DomainRow>(`SELECT ${COLUMNS} FROM domains WHERE id = $1 AND developer_id = $2`, [id, developerId]).pipe(
        Effect.map((rows) => rows[0]),
        Effect.orDie
      )

    const verify: DomainsService["verify"] = (developerId, id) =>
      Effect.gen(function*() {
        const row = yield* find(developerId, id)
        if (row === undefined) return yield* Effect.fail(notFound())
        if (row.verifiedAt !== null) return domainView(row)
        const name = challengeName(row.domain)
        const expected = challengeValue(row.verificationToken)
        const lookup = yield* lookupTxt(name, config.dnsResolver)
        if (lookup._tag === "Failed") {
          return yield* Effect.fail(new DnsUnavailable({ message: `The DNS lookup of ${name} failed (${lookup.reason}); try again` }))
        }
        if (lookup._tag === "Missing" || lookup.records.length === 0) {
          return yield* Effect.fail(new DomainVerificationFailed({ message: `No TXT record found at ${name}` }))
        }
        if (!lookup.records.some((value) => value.trim() === expected)) {
          return yield* Effect.fail(new DomainVerificationFailed({ message: `The TXT record at ${name} does not hold the expected value` }))
        }
        const ms = yield* nowMillis
        const updated = yield* sql.unsafe<DomainRow>(
          `UPDATE domains SET verified_at = COALESCE(verified_at, $3) WHERE id = $1 AND developer_id = $2 RETURNING ${COLUMNS}`,
          [id, developerId, new Date(ms)]
        ).pipe(
          Effect.catchIf(isUniqueViolation, () => Effect.fail(new Conflict({ message: "This domain is verified by another account" })))
        )
        if (updated[0] === undefined) return yield* Effect.fail(notFound())
        return domainView(updated[0])
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    const remove: DomainsService["remove"] = (developerId, id) =>
      sql`DELETE FROM domains WHERE id = ${id} AND developer_id = ${developerId} RETURNING id`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => rows.length === 0 ? Effect.fail(notFound()) : Effect.void)
      )

    const verifiedDomains: DomainsService["verifiedDomains"] = (developerId) =>
      sql<{ domain: string }>`SELECT domain FROM domains WHERE developer_id = ${developerId} AND verified_at IS NOT NULL ORDER BY domain`.pipe(
        Effect.map((rows) => rows.map((r) => r.domain)),
        Effect.orDie
      )

    return { list, create, verify, remove, verifiedDomains }
  })
)

/** The capability's services, provided to its handlers and to other capabilities. */
export const DomainsLive = DomainsServiceLive
