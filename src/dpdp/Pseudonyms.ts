/**
 * The pseudonym of an erased principal (decisions §21): `prn_` + 26 Crockford base32 characters of
 * HMAC-SHA256(the developer's pseudonym key, principal id). The key is 32 random bytes per developer,
 * made on first use and stored sealed with the vault keys (AES-256-GCM, bound to the developer);
 * it is never exported. The same id always gives the same pseudonym, so a repeated erasure finds
 * the first one.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { createHmac, randomBytes } from "node:crypto"
import { type Keyring, open, type SealContext, seal } from "../vault/Crypto.ts"

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

const base32 = (bytes: Buffer, chars: number) => {
  let bits = 0
  let value = 0
  let out = ""
  for (const byte of bytes) {
    value = (value << 8) | byte
    bits += 8
    while (bits >= 5 && out.length < chars) {
      out += CROCKFORD[(value >>> (bits - 5)) & 31]
      bits -= 5
    }
    value &= (1 << bits) - 1
  }
  return out
}

export const pseudonymWith = (key: Buffer, principalId: string) =>
  `prn_${base32(createHmac("sha256", key).update(principalId, "utf8").digest(), 26)}`

const context = (developerId: string): SealContext => ({ id: "dpdp.pseudonym-key", developerId, principalId: "", service: "dpdp" })

/** the developer's key, made (and sealed) on first use; concurrent first uses agree on the stored one */
export const pseudonymKey = (sql: SqlClient.SqlClient, ring: Keyring, developerId: string, ms: number) =>
  Effect.gen(function*() {
    const sealed = seal(ring, context(developerId), randomBytes(32).toString("base64"))
    yield* sql`INSERT INTO dpdp_pseudonym_keys (developer_id, sealed_key, created_at)
               VALUES (${developerId}, ${JSON.stringify(sealed)}, ${new Date(ms)}) ON CONFLICT (developer_id) DO NOTHING`
    const [row] = yield* sql<{ sealedKey: string }>`SELECT sealed_key FROM dpdp_pseudonym_keys WHERE developer_id = ${developerId}`
    const text = yield* open(ring, context(developerId), JSON.parse(row!.sealedKey))
    return Buffer.from(text, "base64")
  }).pipe(Effect.orDie)

export const pseudonymOf = (sql: SqlClient.SqlClient, ring: Keyring, developerId: string, principalId: string, ms: number) =>
  Effect.map(pseudonymKey(sql, ring, developerId, ms), (key) => pseudonymWith(key, principalId))
