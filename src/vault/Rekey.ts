/**
 * `agent-auth vault rekey`: re-encrypts everything sealed with the vault keys that is not under the
 * active key, online: the vault credentials, the webhook signing secrets, then the SSO connections'
 * client secrets (decisions §12).
 *
 * Rows are taken in id order, in batches; each batch is its own short transaction that locks its
 * rows with FOR UPDATE SKIP LOCKED, so the service keeps serving (exchanges read without locks;
 * a row being written right now is skipped and picked up by a later pass). Running it again does
 * nothing (only rows whose key id differs from the active key are touched). Rows that do not
 * decrypt under any configured key are left as they were and reported.
 *
 * Run it after every instance runs with the new key first (VAULT_ENCRYPTION_KEYS=new,old), so no
 * instance writes under the old key any more; then the old key can be dropped from the list.
 */
import { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Effect } from "effect"
import type { OperatorCommand } from "../platform/OperatorCommand.ts"
import { ssoSecretContext } from "../sso/Connections.ts"
import { secretContext } from "../webhooks/Service.ts"
import { nowMillis } from "../platform/Time.ts"
import { type Keyring, keyringFor, openSync, seal, type SealContext, type Sealed } from "./Crypto.ts"

export interface RekeyedKind {
  readonly rekeyed: number
  /** rows that no configured key decrypts (left unchanged) */
  readonly unreadable: ReadonlyArray<string>
  /** rows still under another key (locked throughout every pass) */
  readonly remaining: number
}

export interface RekeyResult {
  readonly activeKeyId: string
  readonly credentials: RekeyedKind
  readonly webhookSecrets: RekeyedKind
  readonly ssoClientSecrets: RekeyedKind
}

/** One kind of sealed row: how to take a batch not under the active key, and how to write it back. */
interface SealedRows {
  /** up to `limit` rows after `after` (id order) not under `active`, locked FOR UPDATE SKIP LOCKED */
  readonly batch: (active: string, after: string, limit: number) => Effect.Effect<
    ReadonlyArray<{ readonly id: string; readonly context: SealContext; readonly sealed: Sealed }>,
    SqlError,
    SqlClient.SqlClient
  >
  /** writes the re-sealed rows, a no-op for a row another writer already moved to `active` */
  readonly write: (active: string, rows: ReadonlyArray<{ readonly id: string; readonly sealed: Sealed }>) => Effect.Effect<void, SqlError, SqlClient.SqlClient>
  readonly countNotUnder: (active: string) => Effect.Effect<number, SqlError, SqlClient.SqlClient>
}

const vaultCredentials: SealedRows = {
  batch: (active, after, limit) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ id: string; developerId: string; principalId: string; service: string; keyId: string; iv: string; ciphertext: string }>`
        SELECT id, developer_id, principal_id, service, key_id, iv, ciphertext FROM vault_credentials
        WHERE key_id <> ${active} AND id > ${after}
        ORDER BY id LIMIT ${limit}
        FOR UPDATE SKIP LOCKED`.pipe(Effect.map((rows) =>
        rows.map((row) => ({
          id: row.id,
          context: { id: row.id, developerId: row.developerId, principalId: row.principalId, service: row.service },
          sealed: { keyId: row.keyId, iv: row.iv, ciphertext: row.ciphertext }
        }))
      ))),
  write: (active, rows) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe(
        `UPDATE vault_credentials v SET key_id = $1, iv = u.iv, ciphertext = u.ct
         FROM unnest($2::text[], $3::text[], $4::text[]) AS u(id, iv, ct)
         WHERE v.id = u.id AND v.key_id <> $1`,
        [active, rows.map((r) => r.id), rows.map((r) => r.sealed.iv), rows.map((r) => r.sealed.ciphertext)] as any
      )).pipe(Effect.asVoid),
  countNotUnder: (active) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ n: number }>`SELECT count(*)::int AS n FROM vault_credentials WHERE key_id <> ${active}`).pipe(
        Effect.map(([row]) => Number(row?.n ?? 0))
      )
}

/**
 * A webhook secret column holding a JSON Sealed, sealed with the same keys as the vault: the
 * current secret, and the one a rotation replaced (still signing until previous_secret_expires_at,
 * issue 17). The column name is one of these two constants, never input.
 */
const webhookSecretColumn = (column: "secret_ciphertext" | "previous_secret_ciphertext"): SealedRows => ({
  batch: (active, after, limit) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe<{ id: string; developerId: string; sealed: string }>(
        `SELECT id, developer_id, ${column} AS sealed FROM webhook_endpoints
         WHERE ${column} IS NOT NULL AND ${column}::jsonb->>'keyId' <> $1 AND id > $2
         ORDER BY id LIMIT $3
         FOR UPDATE SKIP LOCKED`,
        [active, after, limit]
      ).pipe(Effect.map((rows) =>
        rows.map((row) => ({ id: row.id, context: secretContext(row.id, row.developerId), sealed: JSON.parse(row.sealed) as Sealed }))
      ))),
  write: (active, rows) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe(
        `UPDATE webhook_endpoints w SET ${column} = u.sealed
         FROM unnest($2::text[], $3::text[]) AS u(id, sealed)
         WHERE w.id = u.id AND w.${column}::jsonb->>'keyId' <> $1`,
        [active, rows.map((r) => r.id), rows.map((r) => JSON.stringify(r.sealed))] as any
      )).pipe(Effect.asVoid),
  countNotUnder: (active) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe<{ n: number }>(
        `SELECT count(*)::int AS n FROM webhook_endpoints WHERE ${column} IS NOT NULL AND ${column}::jsonb->>'keyId' <> $1`,
        [active]
      )).pipe(Effect.map(([row]) => Number(row?.n ?? 0)))
})

/** An SSO connection's OIDC client secret (a JSON Sealed bound to the connection row). */
const ssoClientSecrets: SealedRows = {
  batch: (active, after, limit) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ id: string; developerId: string; sealed: string }>`
        SELECT id, developer_id, client_secret_ciphertext AS sealed FROM sso_connections
        WHERE client_secret_ciphertext IS NOT NULL AND client_secret_ciphertext::jsonb->>'keyId' <> ${active} AND id > ${after}
        ORDER BY id LIMIT ${limit}
        FOR UPDATE SKIP LOCKED`.pipe(Effect.map((rows) =>
        rows.map((row) => ({ id: row.id, context: ssoSecretContext(row.id, row.developerId), sealed: JSON.parse(row.sealed) as Sealed }))
      ))),
  write: (active, rows) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe(
        `UPDATE sso_connections c SET client_secret_ciphertext = u.sealed
         FROM unnest($2::text[], $3::text[]) AS u(id, sealed)
         WHERE c.id = u.id AND c.client_secret_ciphertext::jsonb->>'keyId' <> $1`,
        [active, rows.map((r) => r.id), rows.map((r) => JSON.stringify(r.sealed))] as any
      )).pipe(Effect.asVoid),
  countNotUnder: (active) =>
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql<{ n: number }>`SELECT count(*)::int AS n FROM sso_connections
                         WHERE client_secret_ciphertext IS NOT NULL AND client_secret_ciphertext::jsonb->>'keyId' <> ${active}`).pipe(
        Effect.map(([row]) => Number(row?.n ?? 0))
      )
}

const webhookSecrets = webhookSecretColumn("secret_ciphertext")
/** expired ones are cleared first: nothing reads them, and an old key may no longer open them */
const previousWebhookSecrets = webhookSecretColumn("previous_secret_ciphertext")

const clearExpiredPreviousSecrets = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  Effect.flatMap(nowMillis, (ms) =>
    sql`UPDATE webhook_endpoints SET previous_secret_ciphertext = NULL, previous_secret_expires_at = NULL
        WHERE previous_secret_expires_at IS NOT NULL AND previous_secret_expires_at <= ${new Date(ms)}`))

const both = (a: RekeyedKind, b: RekeyedKind): RekeyedKind => ({
  rekeyed: a.rekeyed + b.rekeyed,
  unreadable: [...new Set([...a.unreadable, ...b.unreadable])],
  remaining: a.remaining + b.remaining
})

const rekeyRows = (ring: Keyring, rows: SealedRows, batchSize: number, maxPasses: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const active = ring.active.kid
    const unreadable = new Set<string>()
    let rekeyed = 0
    let remaining = 0
    for (let pass = 0; pass < maxPasses; pass++) {
      let after = ""
      for (;;) {
        const batch = yield* sql.withTransaction(Effect.gen(function*() {
          const taken = yield* rows.batch(active, after, batchSize)
          const resealed: Array<{ id: string; sealed: Sealed }> = []
          for (const row of taken) {
            const plaintext = openSync(ring, row.context, row.sealed)
            if (typeof plaintext !== "string") {
              unreadable.add(row.id)
              continue
            }
            resealed.push({ id: row.id, sealed: seal(ring, row.context, plaintext) })
          }
          if (resealed.length > 0) yield* rows.write(active, resealed)
          return { last: taken[taken.length - 1]?.id, done: resealed.length }
        }))
        rekeyed += batch.done
        if (batch.last === undefined) break
        after = batch.last
      }
      remaining = (yield* rows.countNotUnder(active)) - unreadable.size
      if (remaining <= 0) {
        remaining = 0
        break
      }
      // Some rows were locked by a refresh, an upsert or a secret rotation: give them a moment, then pass again.
      yield* Effect.sleep("100 millis")
    }
    return { rekeyed, unreadable: [...unreadable], remaining } satisfies RekeyedKind
  })

export const rekey = (ring: Keyring, options: { batchSize?: number; maxPasses?: number } = {}) =>
  Effect.gen(function*() {
    const batchSize = options.batchSize ?? 200
    const maxPasses = options.maxPasses ?? 20
    return {
      activeKeyId: ring.active.kid,
      credentials: yield* rekeyRows(ring, vaultCredentials, batchSize, maxPasses),
      webhookSecrets: both(
        yield* rekeyRows(ring, webhookSecrets, batchSize, maxPasses),
        yield* Effect.zipRight(clearExpiredPreviousSecrets, rekeyRows(ring, previousWebhookSecrets, batchSize, maxPasses))
      ),
      ssoClientSecrets: yield* rekeyRows(ring, ssoClientSecrets, batchSize, maxPasses)
    } satisfies RekeyResult
  })

/** `agent-auth vault rekey [--batch-size N]` */
export const rekeyCommand: OperatorCommand = (args, config) =>
  Effect.gen(function*() {
    let batchSize = 200
    for (let i = 0; i < args.length; i++) {
      if (args[i] === "--batch-size" && /^\d+$/.test(args[i + 1] ?? "") && Number(args[i + 1]) > 0) {
        batchSize = Number(args[++i])
      } else {
        return yield* Effect.fail(new Error("usage: agent-auth vault rekey [--batch-size N]"))
      }
    }
    const ring = yield* Effect.try({
      try: () => keyringFor(config, { generate: false }),
      catch: (e) => new Error(e instanceof Error ? e.message : String(e))
    })
    const result = yield* rekey(ring, { batchSize }).pipe(
      Effect.mapError((e) => new Error(`database error: ${e.message}`))
    )
    const { credentials, webhookSecrets: secrets, ssoClientSecrets: sso } = result
    const summary = `re-encrypted ${credentials.rekeyed} vault credential(s), ${secrets.rekeyed} webhook secret(s) and ${sso.rekeyed} SSO client secret(s) under key ${result.activeKeyId}`
    const unreadable = [...credentials.unreadable, ...secrets.unreadable, ...sso.unreadable]
    if (unreadable.length > 0) {
      return yield* Effect.fail(new Error(
        `${summary}; ${unreadable.length} could not be decrypted with any configured key and were left unchanged: ${unreadable.slice(0, 10).join(", ")}`
      ))
    }
    const remaining = credentials.remaining + secrets.remaining + sso.remaining
    if (remaining > 0) {
      return yield* Effect.fail(new Error(`${summary}; ${remaining} still locked by other writers: run it again`))
    }
    return summary
  })
