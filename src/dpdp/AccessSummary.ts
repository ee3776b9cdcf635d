/**
 * What the service holds about one data principal, for the right of access (decisions §21,
 * "Data-principal rights"): their grants by state, the agents that held one (delegated ones too:
 * s.11(1)(b) sharing), the scopes granted, their audit entries, vault services (names only),
 * passkeys, consent bundles, grievances and the nomination. Read in the access request's transaction.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { nominationView, readNomination } from "./Nomination.ts"

const MAX_AGENTS = 100

export interface AccessSummary {
  readonly grants: { readonly active: number; readonly revoked: number; readonly expired: number }
  readonly agents: ReadonlyArray<{ readonly agentId: string; readonly name: string; readonly did: string }>
  readonly scopes: ReadonlyArray<string>
  readonly auditEntries: { readonly count: number; readonly first: string | null; readonly last: string | null }
  readonly vaultServices: ReadonlyArray<string>
  readonly passkeys: number
  readonly consentBundles: number
  readonly grievances: ReadonlyArray<{ readonly grievanceId: string; readonly referenceNumber: string; readonly status: string }>
  readonly nomination: ReturnType<typeof nominationView> | null
  /** the erasures asked for the principal (found by their pseudonym) */
  readonly erasures: ReadonlyArray<{ requestId: string; status: string; submittedAt: string }>
}

export const accessSummary = (developerId: string, principalId: string, at: Date, didOf: (agentId: string) => string, pseudonym: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [grants] = yield* sql<{ active: number; revoked: number; expired: number }>`
      SELECT count(*) FILTER (WHERE status = 'active' AND expires_at > ${at})::int AS active,
             count(*) FILTER (WHERE status = 'revoked')::int AS revoked,
             count(*) FILTER (WHERE status = 'active' AND expires_at <= ${at})::int AS expired
        FROM grants WHERE developer_id = ${developerId} AND principal_id = ${principalId}`
    const agents = yield* sql<{ id: string; name: string }>`
      SELECT a.id, a.name FROM agents a
       WHERE a.id IN (SELECT DISTINCT agent_id FROM grants WHERE developer_id = ${developerId} AND principal_id = ${principalId})
       ORDER BY a.id LIMIT ${MAX_AGENTS}`
    const scopes = yield* sql<{ scope: string }>`
      SELECT DISTINCT unnest(scopes) AS scope FROM grants WHERE developer_id = ${developerId} AND principal_id = ${principalId} ORDER BY 1`
    const [audit] = yield* sql<{ count: number; first: Date | null; last: Date | null }>`
      SELECT count(*)::int AS count, min(created_at) AS first, max(created_at) AS last
        FROM audit_log WHERE developer_id = ${developerId} AND principal_id = ${principalId}`
    const vault = yield* sql<{ service: string }>`
      SELECT DISTINCT service FROM vault_credentials WHERE developer_id = ${developerId} AND principal_id = ${principalId} ORDER BY 1`
    const [passkeys] = yield* sql<{ n: number }>`
      SELECT count(*)::int AS n FROM webauthn_credentials WHERE developer_id = ${developerId} AND principal_id = ${principalId} AND deleted_at IS NULL`
    const [bundles] = yield* sql<{ n: number }>`
      SELECT count(*)::int AS n FROM consent_bundles WHERE developer_id = ${developerId} AND user_id = ${principalId}`
    const grievances = yield* sql<{ id: string; referenceNumber: string; status: string }>`
      SELECT id, reference_number, status FROM dpdp_grievances
       WHERE developer_id = ${developerId} AND data_principal_id = ${principalId} ORDER BY created_at DESC, id DESC LIMIT 100`
    const nomination = yield* readNomination(developerId, principalId)
    const erasures = yield* sql<{ id: string; status: string; submittedAt: Date }>`
      SELECT id, status, submitted_at FROM dpdp_erasures WHERE developer_id = ${developerId} AND pseudonym = ${pseudonym}
       ORDER BY submitted_at DESC, id DESC LIMIT 100`
    const iso = (d: Date | string | null) => (d === null ? null : new Date(d).toISOString())
    return {
      grants: grants!,
      agents: agents.map((a) => ({ agentId: a.id, name: a.name, did: didOf(a.id) })),
      scopes: scopes.map((s) => s.scope),
      auditEntries: { count: audit!.count, first: iso(audit!.first), last: iso(audit!.last) },
      vaultServices: vault.map((v) => v.service),
      passkeys: passkeys!.n,
      consentBundles: bundles!.n,
      grievances: grievances.map((g) => ({ grievanceId: g.id, referenceNumber: g.referenceNumber, status: g.status })),
      nomination: nomination === undefined ? null : nominationView(nomination),
      erasures: erasures.map((e) => ({ requestId: e.id, status: e.status, submittedAt: e.submittedAt.toISOString() }))
    } satisfies AccessSummary
  })
