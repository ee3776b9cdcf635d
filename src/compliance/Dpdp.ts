/**
 * DPDP / GDPR exports in the published shape (decisions §15): POST /v1/dpdp/exports answers 201
 * with `{ exportId, type, format, recordCount, truncated, auditLogLimit, dataPrincipalId, data,
 * expiresAt, createdAt }`. Nothing is cut: the published implementation stopped the action log at
 * 1,000 rows and said `truncated: true`; here a window above INLINE_MAX_ROWS answers 202 with a job
 * that writes the same `data` document in full (`truncated` is always false, `auditLogLimit` null).
 * Consent records are the grants (our consent artefact), the action log the audit chain's entries.
 */
import { Chunk, Effect, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import { nowMillis } from "../platform/Time.ts"
import { PAGE } from "./Repo.ts"
import type { ComplianceService, ExportResult } from "./Service.ts"

export const INLINE_MAX_ROWS = 10_000
export const DPDP_TYPES = ["dpdp-audit", "gdpr-article-15", "eu-ai-act-conformance"] as const

export interface DpdpParams {
  readonly type: (typeof DPDP_TYPES)[number]
  readonly dateFrom: string
  readonly dateTo: string
  readonly format: "json"
  readonly includeActionLog: boolean
  readonly includeConsentRecords: boolean
  readonly dataPrincipalId: string | null
}

const principalFilter = (p: DpdpParams, params: Array<unknown>) => {
  if (p.dataPrincipalId === null) return ""
  params.push(p.dataPrincipalId)
  const n = params.length
  return ` AND (principal_id = $${n} OR grant_id IN (SELECT id FROM grants WHERE developer_id = $1 AND principal_id = $${n}))`
}

/** rows the export will hold (the inline-or-job decision) */
export const dpdpRowCount = (svc: ComplianceService, developerId: string, p: DpdpParams) =>
  Effect.gen(function*() {
    let total = 0
    if (p.includeActionLog) {
      const params: Array<unknown> = [developerId, new Date(p.dateFrom), new Date(p.dateTo)]
      const where = principalFilter(p, params)
      const [r] = yield* svc.repo.q<{ n: string }>(
        `SELECT count(*) AS n FROM audit_log WHERE developer_id = $1 AND created_at >= $2 AND created_at <= $3${where}`, params)
      total += Number(r!.n)
    }
    if (p.includeConsentRecords) {
      const params: Array<unknown> = [developerId, new Date(p.dateFrom), new Date(p.dateTo)]
      if (p.dataPrincipalId !== null) params.push(p.dataPrincipalId)
      // decisions §21: the consent records themselves (dpdp_consent_records), by their creation time
      const [r] = yield* svc.repo.q<{ n: string }>(
        `SELECT count(*) AS n FROM dpdp_consent_records WHERE developer_id = $1 AND created_at >= $2 AND created_at <= $3
         ${p.dataPrincipalId !== null ? "AND (data_principal_id = $4 OR grant_principal_id = $4)" : ""}`, params)
      total += Number(r!.n)
    }
    return total
  })

/** the `data` document, streamed: consent records, then the action log in chain order */
export const dpdpStream = (
  svc: ComplianceService,
  developerId: string,
  p: DpdpParams,
  exportId: string,
  onDone?: (r: ExportResult) => Effect.Effect<void>
): Stream.Stream<Uint8Array> =>
  Stream.unwrap(Effect.gen(function*() {
    const ms = yield* nowMillis
    const hash = createHash("sha256")
    const out = (text: string): Uint8Array => {
      const b = Buffer.from(text, "utf8")
      hash.update(b)
      return b
    }
    const counts = { consentRecords: 0, auditLog: 0 }
    const head = {
      exportType: p.type, dateRange: { from: p.dateFrom, to: p.dateTo }, generatedAt: new Date(ms).toISOString(), developerId,
      ...(p.dataPrincipalId !== null ? { dataPrincipalId: p.dataPrincipalId } : {})
    }
    const from = new Date(p.dateFrom)
    const to = new Date(p.dateTo)
    const list = <K>(name: string, start: K, page: (after: K) => Effect.Effect<ReadonlyArray<{ row: unknown; key: K }>>, key: "consentRecords" | "auditLog") =>
      Stream.concat(
        Stream.sync(() => out(`,${JSON.stringify(name)}:[`)),
        Stream.concat(
          Stream.paginateChunkEffect(start, (after) =>
            page(after).pipe(Effect.map((items) => {
              let text = ""
              for (const item of items) text += (counts[key]++ === 0 ? "" : ",") + JSON.stringify(item.row)
              return [text === "" ? Chunk.empty<Uint8Array>() : Chunk.of(out(text)),
                items.length < PAGE ? Option.none<K>() : Option.some(items[items.length - 1]!.key)] as const
            }))),
          Stream.sync(() => out("]"))
        )
      )
    const consent = list("consentRecords", undefined as { c: Date; id: string } | undefined, (after) => {
      // decisions §21: from dpdp_consent_records (published fields plus grantIds, consentNoticeVersion, erasedAt)
      const params: Array<unknown> = [developerId, from, to]
      let where = "r.developer_id = $1 AND r.created_at >= $2 AND r.created_at <= $3"
      if (p.dataPrincipalId !== null) {
        params.push(p.dataPrincipalId)
        where += ` AND (r.data_principal_id = $${params.length} OR r.grant_principal_id = $${params.length})`
      }
      if (after) { params.push(after.c, after.id); where += ` AND (r.created_at, r.id) > ($${params.length - 1}, $${params.length})` }
      return svc.repo.q<any>(`SELECT r.id, r.grant_id, r.data_principal_id, r.purposes, r.scopes, r.status, r.consent_notice_id,
                                     r.consent_notice_version, r.consent_given_at, r.processing_expires_at, r.withdrawn_at, r.created_at,
                                     ARRAY(SELECT c.grant_id FROM dpdp_consent_record_grants c WHERE c.record_id = r.id ORDER BY c.grant_id) AS grant_ids
                              FROM dpdp_consent_records r WHERE ${where} ORDER BY r.created_at, r.id LIMIT ${PAGE}`, params).pipe(
        Effect.map((rows) => rows.map((r) => ({
          key: { c: r.createdAt, id: r.id },
          row: {
            id: r.id, recordId: r.id, grantId: r.grantId, grantIds: r.grantIds, dataPrincipalId: r.dataPrincipalId,
            purposes: r.purposes, scopes: r.scopes, consentNoticeId: r.consentNoticeId, consentNoticeVersion: r.consentNoticeVersion,
            status: r.status === "active" && r.processingExpiresAt.getTime() <= ms ? "expired" : r.status,
            consentGivenAt: r.consentGivenAt.toISOString(), processingExpiresAt: r.processingExpiresAt.toISOString(),
            withdrawnAt: r.withdrawnAt === null ? null : r.withdrawnAt.toISOString(),
            // the record keeps no erasure time of its own: erased records are marked by their status
            erasedAt: null
          }
        }))))
    }, "consentRecords")
    const actions = list("auditLog", 0, (after: number) => {
      const params: Array<unknown> = [developerId, from, to, after]
      const where = principalFilter(p, params)
      return svc.repo.q<any>(`SELECT seq, id, action, status, metadata, timestamp FROM audit_log
                              WHERE developer_id = $1 AND created_at >= $2 AND created_at <= $3 AND seq > $4${where}
                              ORDER BY seq LIMIT ${PAGE}`, params).pipe(Effect.map((rows) => rows.map((a) => ({
        key: Number(a.seq),
        row: { id: a.id, action: a.action, status: a.status, metadata: a.metadata, timestamp: a.timestamp }
      }))))
    }, "auditLog")
    const parts: Array<Stream.Stream<Uint8Array>> = [Stream.sync(() => out(JSON.stringify(head).slice(0, -1)))]
    if (p.includeConsentRecords) parts.push(consent)
    if (p.includeActionLog) parts.push(actions)
    // decisions §21: the developer's grievances (no description, evidence or resolution text)
    if (p.type === "dpdp-audit") {
      parts.push(Stream.fromEffect(Effect.gen(function*() {
        const params: Array<unknown> = [developerId, from, to]
        let where = "developer_id = $1 AND created_at >= $2 AND created_at <= $3"
        if (p.dataPrincipalId !== null) { params.push(p.dataPrincipalId); where += ` AND data_principal_id = $${params.length}` }
        const rows = yield* svc.repo.q<any>(`SELECT id, reference_number, type, status, created_at, resolved_at FROM dpdp_grievances
                                             WHERE ${where} ORDER BY created_at, id`, params)
        return out(`,"grievances":${JSON.stringify(rows.map((g) => ({
          id: g.id, reference_number: g.referenceNumber, type: g.type, status: g.status, created_at: g.createdAt.toISOString(),
          resolved_at: g.resolvedAt === null ? null : g.resolvedAt.toISOString()
        })))}`)
      })))
    }
    parts.push(Stream.fromEffect(Effect.gen(function*() {
      const tail = out(`,"truncated":false,"auditLogLimit":null}`)
      const sha256 = hash.digest("hex")
      const rows = { consentRecords: counts.consentRecords, auditLog: counts.auditLog }
      const signature = yield* svc.sign(JSON.stringify({ typ: "service-dpdp-export", exportId, sha256 }))
      yield* svc.recordExport(developerId, { exportId, kind: "dpdp", type: p.type, format: "json", rows, sha256 })
      if (onDone) yield* onDone({ sha256, rows, signature })
      return tail
    })))
    return parts.reduce((a, b) => Stream.concat(a, b))
  }))
