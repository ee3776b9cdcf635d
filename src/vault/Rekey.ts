/**
 * `agent-auth vault rekey`: re-encrypts every vault row that is not under the active key, online.
 *
 * Rows are taken in id order, in batches; each batch is its own short transaction that locks its
 * rows with FOR UPDATE SKIP LOCKED, so the service keeps serving (exchanges read without locks;
 * a row being refreshed or replaced right now is skipped and picked up by a later pass). Running it
 * again does nothing (only rows whose key_id differs from the active key are touched). Rows that do
 * not decrypt under any configured key are left as they were and reported.
 *
 * Run it after every instance runs with the new key first (VAULT_ENCRYPTION_KEYS=new,old), so no
 * instance writes under the old key any more; then the old key can be dropped from the list.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { OperatorCommand } from "../operator.ts"
import { type Keyring, keyringFor, openSync, seal } from "./Crypto.ts"

export interface RekeyResult {
  readonly activeKeyId: string
  readonly rekeyed: number
  /** rows that no configured key decrypts (left unchanged) */
  readonly unreadable: ReadonlyArray<string>
  /** rows still under another key (locked throughout every pass) */
  readonly remaining: number
}

interface Row {
  readonly id: string
  readonly developerId: string
  readonly principalId: string
  readonly service: string
  readonly keyId: string
  readonly iv: string
  readonly ciphertext: string
}

export const rekey = (ring: Keyring, options: { batchSize?: number; maxPasses?: number } = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const batchSize = options.batchSize ?? 200
    const maxPasses = options.maxPasses ?? 20
    const active = ring.active.kid
    const unreadable = new Set<string>()
    let rekeyed = 0
    let remaining = 0
    for (let pass = 0; pass < maxPasses; pass++) {
      let after = ""
      for (;;) {
        const batch = yield* sql.withTransaction(Effect.gen(function*() {
          const rows = yield* sql<Row>`
            SELECT id, developer_id, principal_id, service, key_id, iv, ciphertext FROM vault_credentials
            WHERE key_id <> ${active} AND id > ${after}
            ORDER BY id LIMIT ${batchSize}
            FOR UPDATE SKIP LOCKED`
          const ids: Array<string> = []
          const ivs: Array<string> = []
          const cts: Array<string> = []
          for (const row of rows) {
            const context = { id: row.id, developerId: row.developerId, principalId: row.principalId, service: row.service }
            const plaintext = openSync(ring, context, row)
            if (typeof plaintext !== "string") {
              unreadable.add(row.id)
              continue
            }
            const sealed = seal(ring, context, plaintext)
            ids.push(row.id)
            ivs.push(sealed.iv)
            cts.push(sealed.ciphertext)
          }
          if (ids.length > 0) {
            // The key-id check makes the write a no-op for a row another writer already moved on.
            yield* sql.unsafe(
              `UPDATE vault_credentials v SET key_id = $1, iv = u.iv, ciphertext = u.ct
               FROM unnest($2::text[], $3::text[], $4::text[]) AS u(id, iv, ct)
               WHERE v.id = u.id AND v.key_id <> $1`,
              [active, ids, ivs, cts] as any
            )
          }
          return { last: rows[rows.length - 1]?.id, done: ids.length }
        }))
        rekeyed += batch.done
        if (batch.last === undefined) break
        after = batch.last
      }
      const [count] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM vault_credentials WHERE key_id <> ${active}`
      remaining = Number(count?.n ?? 0) - unreadable.size
      if (remaining <= 0) {
        remaining = 0
        break
      }
      // Some rows were locked by a refresh or an upsert: give them a moment, then pass again.
      yield* Effect.sleep("100 millis")
    }
    return { activeKeyId: active, rekeyed, unreadable: [...unreadable], remaining } satisfies RekeyResult
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
    const summary = `re-encrypted ${result.rekeyed} vault credential(s) under key ${result.activeKeyId}`
    if (result.unreadable.length > 0) {
      return yield* Effect.fail(new Error(
        `${summary}; ${result.unreadable.length} could not be decrypted with any configured key and were left unchanged: ${result.unreadable.slice(0, 10).join(", ")}`
      ))
    }
    if (result.remaining > 0) {
      return yield* Effect.fail(new Error(`${summary}; ${result.remaining} still locked by other writers: run it again`))
    }
    return summary
  })
