/**
 * One erasure of a data principal (decisions §21), in the caller's transaction. In order: the
 * principal's pending consent requests are denied; every active grant (theirs, and those their
 * consent records cover) is revoked through the one revocation path; their consent records are
 * marked `erased` (proof JWTs replaced by their SHA-256, withdrawal reasons dropped); credentials,
 * passkeys, sessions, SSO links and nominations are deleted; every other column of ErasureMap.ts is
 * pseudonymised, stored events included; audit entries naming them lose their principal id, metadata
 * and salt (hash version 2 keeps verifying on its digests; version-1 entries are tombstoned and the
 * erasure's own entry commits to them). What the one-year log duty (Rule 8(3)) keeps of those entries
 * is sealed into `dpdp_erasure_holds` first.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import type { GrantsService } from "../grants/Service.ts"
import { type Keyring, seal } from "../vault/Crypto.ts"

const DAY_MS = 86_400_000

export interface ErasureCounts {
  readonly grantsRevoked: number
  readonly recordsErased: number
  readonly requestsDenied: number
  readonly auditEntries: number
  readonly legacyRedactions: number
  readonly deleted: Record<string, number>
  readonly pseudonymised: Record<string, number>
}

/** tables whose rows go, by (developer, principal id column) */
const DELETED: ReadonlyArray<readonly [string, string]> = [
  ["vault_credentials", "principal_id"],
  ["webauthn_credentials", "principal_id"],
  ["webauthn_user_handles", "principal_id"],
  ["webauthn_challenges", "principal_id"],
  ["principal_sessions", "principal_id"],
  ["sso_sessions", "principal_id"],
  ["sso_identities", "principal_id"]
]

/** tables whose principal id column takes the pseudonym, by developer */
const PSEUDONYMISED: ReadonlyArray<readonly [string, string]> = [
  ["grants", "principal_id"],
  ["auth_requests", "principal_id"],
  ["consent_bundles", "user_id"],
  ["policy_decisions", "principal_id"],
  ["policies", "principal_id"],
  ["anomaly_alerts", "principal_id"]
]

export const runErasure = (
  deps: { readonly sql: SqlClient.SqlClient; readonly grants: GrantsService; readonly ring: Keyring },
  input: { readonly developerId: string; readonly principalId: string; readonly pseudonym: string; readonly requestId: string; readonly holdDays: number; readonly ms: number }
) =>
  Effect.gen(function*() {
    const { sql, grants, ring } = deps
    const { developerId, principalId: pid, pseudonym, requestId, ms } = input
    const at = new Date(ms)
    const quoted = JSON.stringify(pid)
    const count = (rows: ReadonlyArray<unknown>) => rows.length

    // 1. nobody may approve for them any more
    const denied = yield* sql`UPDATE auth_requests SET status = 'denied', decided_at = ${at}
                              WHERE developer_id = ${developerId} AND principal_id = ${pid} AND status = 'pending' RETURNING id`
    // 2. their grants, and the grants their records cover, through the one revocation path
    const own = yield* grants.revokePrincipal(developerId, pid)
    const covered = (yield* sql<{ grantId: string }>`
      SELECT DISTINCT c.grant_id FROM dpdp_consent_record_grants c JOIN dpdp_consent_records r ON r.id = c.record_id
      JOIN grants g ON g.id = c.grant_id
      WHERE r.developer_id = ${developerId} AND (r.data_principal_id = ${pid} OR r.grant_principal_id = ${pid}) AND g.status = 'active'
      ORDER BY c.grant_id`).map((r) => r.grantId)
    const more = covered.length === 0 ? [] : yield* grants.revokeMany(developerId, covered)
    const revoked = new Set([...own, ...more.filter((id) => covered.includes(id))])
    // 3. their consent records
    const records = yield* sql`
      UPDATE dpdp_consent_records SET status = 'erased',
        data_principal_id = CASE WHEN data_principal_id = ${pid} THEN ${pseudonym} ELSE data_principal_id END,
        grant_principal_id = CASE WHEN grant_principal_id = ${pid} THEN ${pseudonym} ELSE grant_principal_id END,
        proof_jwt = CASE WHEN proof_jwt LIKE 'sha256:%' THEN proof_jwt ELSE 'sha256:' || encode(sha256(convert_to(proof_jwt, 'UTF8')), 'hex') END,
        withdrawn_reason = NULL
      WHERE developer_id = ${developerId} AND (data_principal_id = ${pid} OR grant_principal_id = ${pid}) RETURNING id`
    // 4. what goes
    const deleted: Record<string, number> = {}
    for (const [table, column] of DELETED) {
      deleted[table] = count(yield* sql.unsafe(`DELETE FROM ${table} WHERE developer_id = $1 AND ${column} = $2 RETURNING 1`, [developerId, pid]))
    }
    deleted.dpdp_nominations = count(yield* sql`DELETE FROM dpdp_nominations WHERE developer_id = ${developerId}
      AND (data_principal_id = ${pid} OR nominee_principal_id = ${pid}) RETURNING 1`)
    // offline entries of their bundles keep their device hash and signature; their metadata goes
    yield* sql`UPDATE offline_audit_entries SET metadata = NULL WHERE developer_id = ${developerId}
               AND bundle_id IN (SELECT id FROM consent_bundles WHERE developer_id = ${developerId} AND user_id = ${pid})`
    // stored credentials lose their payload; §15 exports naming them lose their results
    yield* sql`UPDATE vc_credentials SET principal_id = ${pseudonym}, credential = '' WHERE developer_id = ${developerId} AND principal_id = ${pid}`
    const exports = yield* sql<{ id: string }>`
      UPDATE compliance_exports SET params = jsonb_set(params, '{dataPrincipalId}', to_jsonb(${pseudonym}::text))
      WHERE developer_id = ${developerId} AND params->>'dataPrincipalId' = ${pid} RETURNING id`
    if (exports.length > 0) yield* sql`DELETE FROM compliance_export_chunks WHERE export_id IN ${sql.in(exports.map((e) => e.id))}`
    deleted.compliance_export_results = exports.length
    // 5. what stays, under the pseudonym
    const pseudonymised: Record<string, number> = {}
    for (const [table, column] of PSEUDONYMISED) {
      pseudonymised[table] = count(yield* sql.unsafe(
        `UPDATE ${table} SET ${column} = $3 WHERE developer_id = $1 AND ${column} = $2 RETURNING 1`, [developerId, pid, pseudonym]))
    }
    const grievances = yield* sql<{ id: string }>`
      UPDATE dpdp_grievances SET data_principal_id = ${pseudonym}, description = '', evidence = NULL
      WHERE developer_id = ${developerId} AND data_principal_id = ${pid} RETURNING id`
    pseudonymised.dpdp_grievances = grievances.length
    if (grievances.length > 0) yield* sql`UPDATE dpdp_grievance_history SET note = NULL WHERE grievance_id IN ${sql.in(grievances.map((g) => g.id))}`
    pseudonymised.breach_intimated_principals = count(yield* sql`
      UPDATE breach_intimated_principals p SET principal_id = ${pseudonym} FROM breaches b
      WHERE b.id = p.breach_id AND b.developer_id = ${developerId} AND p.principal_id = ${pid} RETURNING 1`)
    pseudonymised.breaches = count(yield* sql`
      UPDATE breaches SET affected_principal_ids = array_replace(affected_principal_ids, ${pid}, ${pseudonym})
      WHERE developer_id = ${developerId} AND ${pid} = ANY(affected_principal_ids) RETURNING 1`)
    pseudonymised.scim_users = count(yield* sql`
      UPDATE scim_users SET principal_id = ${pseudonym}, user_name = ${pseudonym}, external_id = NULL, display_name = NULL,
        resource = '{}', active = false, deleted_at = coalesce(deleted_at, ${at}), updated_at = ${at}
      WHERE developer_id = ${developerId} AND (principal_id = ${pid} OR lower(user_name) = lower(${pid})) RETURNING 1`)
    // stored events: the id wherever it stands in the payload (principalId, dataPrincipalId, userId, …)
    pseudonymised.events = count(yield* sql`
      UPDATE events SET data = replace(data::text, ${quoted}, ${JSON.stringify(pseudonym)})::jsonb
      WHERE developer_id = ${developerId} AND strpos(data::text, ${quoted}) > 0 RETURNING 1`)
    // 6. the audit chain: held, then erased
    const entries = yield* sql<{ id: string; principalId: string | null; metadata: unknown; piiSalt: string | null; hashVersion: number; hash: string; createdAt: Date }>`
      SELECT id, principal_id, metadata, pii_salt, hash_version, hash, created_at FROM audit_log
      WHERE developer_id = ${developerId} AND erased_at IS NULL AND (principal_id = ${pid} OR strpos(metadata::text, ${quoted}) > 0)
      ORDER BY seq`
    let heldUntil: Date | null = null
    const held = input.holdDays === 0 ? [] : entries.filter((e) => e.createdAt.getTime() > ms - input.holdDays * DAY_MS)
    if (held.length > 0) {
      const newest = Math.max(...held.map((e) => e.createdAt.getTime()))
      heldUntil = new Date(newest + input.holdDays * DAY_MS)
      const sealed = seal(ring, { id: requestId, developerId, principalId: "", service: "dpdp.erasure-hold" },
        JSON.stringify(held.map((e) => ({ entryId: e.id, principalId: e.principalId, metadata: e.metadata, piiSalt: e.piiSalt }))))
      yield* sql`INSERT INTO dpdp_erasure_holds (erasure_id, developer_id, sealed, held_until, created_at)
                 VALUES (${requestId}, ${developerId}, ${JSON.stringify(sealed)}, ${heldUntil}, ${at})
                 ON CONFLICT (erasure_id) DO NOTHING`
    }
    if (entries.length > 0) {
      yield* sql`UPDATE audit_log SET principal_id = CASE WHEN principal_id = ${pid} THEN ${pseudonym} ELSE principal_id END,
                   metadata = '{}'::jsonb, pii_salt = NULL, erased_at = ${at}
                 WHERE id IN ${sql.in(entries.map((e) => e.id))}`
    }
    const legacy = entries.filter((e) => Number(e.hashVersion) !== 2).map((e) => `${e.id}:${e.hash}`).sort()
    const counts: ErasureCounts = {
      grantsRevoked: revoked.size,
      recordsErased: records.length,
      requestsDenied: denied.length,
      auditEntries: entries.length,
      legacyRedactions: legacy.length,
      deleted,
      pseudonymised
    }
    return {
      counts,
      heldUntil,
      legacyRedactionDigest: legacy.length === 0 ? null : createHash("sha256").update(legacy.join("\n")).digest("hex")
    }
  })
