import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect, Stream } from "effect"
import { Api } from "../Api.ts"
import { canonicalJson } from "../platform/AuditChain.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, Gone, NotFound } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { dpdpRowCount, dpdpStream, INLINE_MAX_ROWS, type DpdpParams } from "./Dpdp.ts"
import { contentType, envelopeEnd, envelopeHead, type ExportProof, type ExportStart, startOf, type StreamFormat } from "./Format.ts"
import { createJob, getJob, jobFile, type JobParams, jobView, RETENTION_MS } from "./Jobs.ts"
import { checkInlineSize, packStream } from "./Pack.ts"
import { decodePageCursor, encodePageCursor, exportLimit, iso, oneOf, parseWindow } from "./Params.ts"
import { Compliance, type ComplianceService, digestOf } from "./Service.ts"
import { summaryOf } from "./Summary.ts"

const FORMATS = ["json", "ndjson", "csv"] as const
const AUDIT_STATUSES = ["success", "failure", "blocked"] as const
const GRANT_STATUSES = ["active", "revoked", "expired"] as const
const FRAMEWORKS = ["soc2", "gdpr", "dpdp", "all"] as const

const BOOLEANS = ["true", "false"] as const

/** the proof's facts known before the first byte: `Export-Id`, and for audit `Export-Anchor` (empty at the chain's start) */
const startHeaders = (start: ExportStart): Record<string, string> => ({
  "export-id": start.exportId,
  ...(start.kind === "audit" ? { "export-anchor": start.anchor ?? "" } : {})
})

/**
 * A streamed NDJSON/CSV export. Bun's server has no way to send HTTP trailers, so the digest and
 * signature come from GET /v1/compliance/exports/:exportId once the body has ended (the proof is
 * stored before the last byte is sent).
 */
const streamed = (
  svc: ComplianceService,
  developerId: string,
  kind: "audit" | "grants",
  format: StreamFormat,
  query: Parameters<ComplianceService["openExport"]>[3],
  envelope: boolean
) =>
  Effect.map(svc.openExport(developerId, kind, format, query, { envelope, recordStart: true }), ({ start, stream }) =>
    HttpServerResponse.stream(stream, {
      contentType: contentType(format),
      headers: {
        "content-disposition": `attachment; filename="${kind}-export.${format}"`,
        "cache-control": "no-store",
        ...startHeaders(start)
      }
    }))

/** GET /v1/compliance/exports/:id: a job (with its proof once complete), or the proof of a streamed export */
const exportView = (row: any, stored: { proof: ExportProof; storedAt: Date } | undefined, nowMs: number) => {
  const proof = stored?.proof
  const proofFields = proof === undefined ? {} : {
    exportId: proof.exportId, issuer: proof.issuer, developerId: proof.developerId, generatedAt: proof.generatedAt, since: proof.since,
    until: proof.until, filters: proof.filters, anchor: proof.anchor, rows: proof.rows, lastHash: proof.lastHash, kid: proof.kid
  }
  if (row !== undefined) return { ...jobView(row, nowMs), ...proofFields }
  const p = proof!
  return {
    id: p.exportId, kind: p.kind, format: p.format, status: p.status, rowCounts: { [p.kind === "audit" ? "entries" : "grants"]: p.rows },
    sha256: p.sha256, signature: p.signature, bytes: null, createdAt: p.generatedAt, completedAt: stored!.storedAt.toISOString(),
    expiresAt: null, error: null,
    ...proofFields
  }
}

const isAuditCursor = (v: any): v is { a: number; l: number; t: number; c: boolean; f: string } =>
  v !== null && typeof v === "object" && [v.a, v.l, v.t].every((n) => Number.isSafeInteger(n) && n >= 0) && typeof v.c === "boolean" &&
  typeof v.f === "string"
const isGrantCursor = (v: any): v is { c: string; id: string; t: number } =>
  v !== null && typeof v === "object" && typeof v.c === "string" && !Number.isNaN(Date.parse(v.c)) && typeof v.id === "string" &&
  Number.isSafeInteger(v.t)

export const ComplianceHttp = HttpApiBuilder.group(Api, "compliance", (handlers) =>
  Effect.gen(function*() {
    const svc = yield* Compliance
    const sql = yield* SqlClient.SqlClient
    const repo = svc.repo

    /** a JSON page is signed like a file: a JWS over the digest of its canonical JSON without `signature` */
    const signPage = <T extends Record<string, unknown>>(developerId: string, kind: string, body: T, rows: number) =>
      Effect.gen(function*() {
        const unsigned = { ...body, kid: svc.kid }
        const sha256 = digestOf(unsigned)
        const signature = yield* svc.sign(canonicalJson({ typ: "service-export-page", issuer: svc.issuer, developerId, sha256 }))
        yield* svc.recordExport(developerId, { kind, format: "json", rows, sha256 })
        return { ...unsigned, signature }
      })

    return handlers
      .handle("summary", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const window = yield* parseWindow(urlParams.since, urlParams.until)
          return yield* summaryOf(svc, developer, window, yield* nowMillis)
        }))
      .handle("exportAudit", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const window = yield* parseWindow(urlParams.since, urlParams.until)
          const format = (yield* oneOf("format", urlParams.format, FORMATS, "json"))!
          const status = yield* oneOf("status", urlParams.status, AUDIT_STATUSES)
          const filters = { agentId: urlParams.agentId, status, action: urlParams.action }
          const envelope = (yield* oneOf("envelope", urlParams.envelope, BOOLEANS, "false")) === "true"
          if (format !== "json") return (yield* streamed(svc, developer.id, "audit", format, { ...window, ...filters }, envelope)) as any
          const limit = yield* exportLimit(urlParams.limit)
          let cursor = yield* decodePageCursor(urlParams.cursor, isAuditCursor)
          // a cursor belongs to the filters it was made with (the anchor of a page depends on them)
          const f = canonicalJson(filters)
          if (cursor !== undefined && cursor.f !== f) {
            return yield* Effect.fail(new BadRequest({ message: "cursor belongs to another set of filters" }))
          }
          if (cursor === undefined) {
            const range = yield* repo.auditRange(developer.id, window.since, window.until)
            const contiguous = filters.agentId === undefined && filters.status === undefined && filters.action === undefined
            const total = range.last < range.first ? 0 : contiguous ? range.last - range.first + 1 : yield* repo.auditCount(developer.id, range.first, range.last, filters)
            cursor = { a: range.first - 1, l: range.last, t: total, c: contiguous, f }
          }
          const rows = yield* repo.auditPage(developer.id, cursor.a, cursor.l, filters, limit + 1)
          const page = rows.slice(0, limit)
          let anchor: string | null = null
          if (cursor.c && page.length > 0 && page[0]!.seq > 1) {
            const [prev] = yield* repo.q<{ hash: string }>(`SELECT hash FROM audit_log WHERE developer_id = $1 AND seq = $2`, [developer.id, page[0]!.seq - 1])
            anchor = prev?.hash ?? null
          }
          const nextCursor = rows.length > limit ? encodePageCursor({ ...cursor, a: page[page.length - 1]!.seq }) : null
          const ms = yield* nowMillis
          return yield* signPage(developer.id, "audit", {
            generatedAt: new Date(ms).toISOString(), total: cursor.t, entries: page, nextCursor, anchor, contiguous: cursor.c
          }, page.length)
        }))
      .handle("exportGrants", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const window = yield* parseWindow(urlParams.since, urlParams.until)
          const format = (yield* oneOf("format", urlParams.format, FORMATS, "json"))!
          const status = yield* oneOf("status", urlParams.status, GRANT_STATUSES)
          const envelope = (yield* oneOf("envelope", urlParams.envelope, BOOLEANS, "false")) === "true"
          if (format !== "json") return (yield* streamed(svc, developer.id, "grants", format, { ...window, status }, envelope)) as any
          const limit = yield* exportLimit(urlParams.limit)
          const cursor = yield* decodePageCursor(urlParams.cursor, isGrantCursor)
          const ms = yield* nowMillis
          const total = cursor?.t ?? (yield* repo.grantCount(developer.id, window.since, window.until, status, ms))
          const rows = yield* repo.grantPage(developer.id, cursor && { createdAt: new Date(cursor.c), id: cursor.id }, window.since,
            window.until, status, ms, limit + 1)
          const page = rows.slice(0, limit)
          const last = page[page.length - 1]
          const nextCursor = rows.length > limit && last ? encodePageCursor({ c: last.key.createdAt.toISOString(), id: last.key.id, t: total }) : null
          return yield* signPage(developer.id, "grants", {
            generatedAt: new Date(ms).toISOString(), total, grants: page.map((p) => p.row), nextCursor
          }, page.length)
        }))
      .handle("evidencePack", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const window = yield* parseWindow(urlParams.since, urlParams.until)
          const framework = (yield* oneOf("framework", urlParams.framework, FRAMEWORKS, "all"))!
          yield* checkInlineSize(svc, developer.id, window)
          const exportId = newId("cexp", yield* nowMillis)
          return HttpServerResponse.stream(packStream(svc, developer, window, framework, exportId, undefined, true), {
            contentType: "application/json",
            headers: { "cache-control": "no-store" }
          }) as any
        }))
      .handle("createJob", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const window = yield* parseWindow(payload.since, payload.until)
          const pack = payload.kind === "evidence-pack"
          const format = payload.format ?? (pack ? "json" : "ndjson")
          if (pack && format !== "json") return yield* Effect.fail(new BadRequest({ message: "An evidence pack is JSON" }))
          if (!pack && format === "json") {
            return yield* Effect.fail(new BadRequest({ message: "A job writes ndjson or csv; JSON pages come from the export routes" }))
          }
          if (pack && (payload.status ?? payload.agentId ?? payload.action) !== undefined) {
            return yield* Effect.fail(new BadRequest({ message: "An evidence pack takes no filters" }))
          }
          if (payload.framework !== undefined && !pack) return yield* Effect.fail(new BadRequest({ message: "framework is for evidence packs" }))
          const filters: Record<string, string> = {}
          if (payload.kind === "audit") {
            const status = yield* oneOf("status", payload.status, AUDIT_STATUSES)
            if (status !== undefined) filters.status = status
            if (payload.agentId !== undefined) filters.agentId = payload.agentId
            if (payload.action !== undefined) filters.action = payload.action
          } else if (payload.kind === "grants") {
            if (payload.agentId !== undefined || payload.action !== undefined) {
              return yield* Effect.fail(new BadRequest({ message: "grants exports filter by status only" }))
            }
            const status = yield* oneOf("status", payload.status, GRANT_STATUSES)
            if (status !== undefined) filters.status = status
          }
          const params = { since: iso(window.since), until: iso(window.until), ...(pack ? { framework: payload.framework ?? "all" } : { filters }) }
          // the job and its start entry commit together (the run records only the end); every run reads
          // the chain as it stood before that entry, so a re-run after a crash exports the same rows
          const job = yield* sql.withTransaction(Effect.gen(function*() {
            const [head] = yield* repo.q<{ seq: string }>(`SELECT seq FROM audit_heads WHERE developer_id = $1`, [developer.id])
            const jobParams: JobParams & { readonly atSeq: number } = { ...params, atSeq: Number(head?.seq ?? 0) }
            const created = yield* createJob(developer.id, payload.kind, format, jobParams)
            yield* svc.recordExport(developer.id, { exportId: created.id, kind: payload.kind, format, stage: "started", ...params })
            return created
          })).pipe(Effect.catchTag("SqlError", Effect.die))
          yield* svc.nudge // again, now that the job is committed
          return job
        }))
      .handle("getJob", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const [row] = yield* repo.q(`SELECT * FROM compliance_exports WHERE id = $1 AND developer_id = $2`, [path.id, developer.id])
          const proof = row === undefined || row.status === "complete" ? yield* svc.proofOf(developer.id, path.id) : undefined
          if (row === undefined && proof === undefined) return yield* Effect.fail(new NotFound({ message: "Export not found" }))
          return exportView(row, proof, yield* nowMillis) as any
        }))
      .handle("downloadJob", ({ path, urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const envelope = (yield* oneOf("envelope", urlParams.envelope, BOOLEANS, "false")) === "true"
          const { view, stream } = yield* jobFile(developer.id, path.id)
          const format = view.format as "json" | StreamFormat
          const proof = format === "json" ? undefined : (yield* svc.proofOf(developer.id, view.id))?.proof
          if (envelope && proof === undefined) {
            return yield* Effect.fail(new BadRequest({ message: "Only an NDJSON or CSV export has an envelope form" }))
          }
          // the stored body is rows only; the envelope wraps it in the proof's first and last lines
          const head = envelope ? Buffer.from(envelopeHead(startOf(proof!)), "utf8") : undefined
          const end = envelope ? Buffer.from(envelopeEnd(proof!), "utf8") : undefined
          const body = head === undefined ? stream : Stream.concat(Stream.concat(Stream.make(head as Uint8Array), stream), Stream.make(end! as Uint8Array))
          return HttpServerResponse.stream(body, {
            contentType: format === "json" ? "application/json" : contentType(format),
            headers: {
              "content-disposition": `attachment; filename="${view.id}.${format}"`,
              "content-length": String((view.bytes ?? 0) + (head?.length ?? 0) + (end?.length ?? 0)),
              "cache-control": "no-store",
              // the digest of the stored body; an envelope's lines lie outside it, so it then goes unsent
              ...(envelope ? {} : { "content-digest": `sha-256=:${Buffer.from(view.sha256!, "hex").toString("base64")}:` }),
              // the whole proof is known before the first byte: the download verifies from its headers alone
              ...(proof === undefined ? {} : { ...startHeaders(proof), "export-proof": Buffer.from(JSON.stringify(proof)).toString("base64url") })
            }
          }) as any
        }))
      .handle("createDpdpExport", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const window = yield* parseWindow(payload.dateFrom, payload.dateTo, ["dateFrom", "dateTo"])
          if (payload.type === "gdpr-article-15" && payload.dataPrincipalId === undefined) {
            return yield* Effect.fail(new BadRequest({ message: "dataPrincipalId is required for a gdpr-article-15 export" }))
          }
          const params: DpdpParams = {
            type: payload.type, dateFrom: window.since!.toISOString(), dateTo: window.until!.toISOString(), format: "json",
            includeActionLog: payload.includeActionLog ?? true, includeConsentRecords: payload.includeConsentRecords ?? true,
            dataPrincipalId: payload.dataPrincipalId ?? null
          }
          const count = yield* dpdpRowCount(svc, developer.id, params)
          const ms = yield* nowMillis
          const base = { type: params.type, format: "json", truncated: false, auditLogLimit: null, dataPrincipalId: params.dataPrincipalId }
          if (count > INLINE_MAX_ROWS) {
            // decisions §21: a DPDP export's id is exp_ (GET /v1/compliance/exports/:id reads it like a cexp_ one)
            const job = yield* createJob(developer.id, "dpdp", "json", { since: params.dateFrom, until: params.dateTo, dpdp: params }, newId("exp", ms))
            return HttpServerResponse.unsafeJson({
              exportId: job.id, ...base, status: "pending", recordCount: count, data: null, expiresAt: null,
              createdAt: new Date(ms).toISOString(), statusUrl: `/v1/compliance/exports/${job.id}`
            }, { status: 202 }) as any
          }
          const exportId = newId("exp", ms)
          let result = { sha256: "", rows: {} as Record<string, number>, signature: "" }
          const parts = yield* Stream.runCollect(dpdpStream(svc, developer.id, params, exportId, (r) => Effect.sync(() => { result = r })))
          const bytes = Buffer.concat([...parts])
          const createdAt = new Date(ms)
          const expiresAt = new Date(ms + RETENTION_MS)
          const recordCount = Object.values(result.rows).reduce((a, b) => a + b, 0)
          yield* repo.q(`
            INSERT INTO compliance_exports (id, developer_id, kind, format, params, status, row_counts, sha256, signature, bytes, chunks,
                                            created_at, completed_at, expires_at, updated_at)
            VALUES ($1, $2, 'dpdp', 'json', $3::jsonb, 'complete', $4::jsonb, $5, $6, $7, 1, $8, $8, $9, $8)`,
            [exportId, developer.id, JSON.stringify({ since: params.dateFrom, until: params.dateTo, dpdp: params }), JSON.stringify(result.rows),
              result.sha256, result.signature, bytes.length, createdAt, expiresAt])
          yield* repo.q(`INSERT INTO compliance_export_chunks (export_id, n, data) VALUES ($1, 0, $2)`, [exportId, bytes])
          return {
            exportId, ...base, recordCount, data: JSON.parse(bytes.toString("utf8")), expiresAt: expiresAt.toISOString(),
            createdAt: createdAt.toISOString()
          }
        }))
      .handle("getDpdpExport", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const row = yield* getJob(developer.id, path.id)
          if (row.kind !== "dpdp") return yield* Effect.fail(new NotFound({ message: "Export not found" }))
          const view = jobView(row, yield* nowMillis)
          if (view.status === "expired") return yield* Effect.fail(new Gone({ message: "Export has expired and its data was deleted" }))
          const p = row.params.dpdp as DpdpParams
          let data: unknown = null
          // small results inline, as published; a large one is downloaded from its job
          if (view.status === "complete" && (view.bytes ?? 0) <= 8 * 1024 * 1024) {
            const chunks = yield* repo.q<{ data: Uint8Array }>(`SELECT data FROM compliance_export_chunks WHERE export_id = $1 ORDER BY n`, [row.id])
            data = JSON.parse(Buffer.concat(chunks.map((c) => c.data)).toString("utf8"))
          }
          return {
            exportId: row.id, type: p.type, dateFrom: p.dateFrom, dateTo: p.dateTo, format: "json", status: view.status,
            recordCount: view.rowCounts === null ? null : Object.values(view.rowCounts).reduce((a, b) => a + b, 0),
            truncated: false, auditLogLimit: null, dataPrincipalId: p.dataPrincipalId, data, sha256: view.sha256, signature: view.signature,
            expiresAt: view.expiresAt, createdAt: view.createdAt,
            ...(view.status === "complete" && data === null ? { downloadUrl: `/v1/compliance/exports/${row.id}/download` } : {})
          }
        }))
  }))
