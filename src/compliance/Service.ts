/**
 * Compliance exports (decisions §15): streamed audit and grant exports (NDJSON, CSV), their JSON
 * pages, the summary, and the signer every export shares. Streams read keyset pages (Repo.ts) and
 * hash as they write, so memory stays at one page and the first byte does not wait for the last row.
 * A streamed body holds only rows; its detached proof is stored when the stream ends (Format.ts).
 * Every export is written to the audit chain as `service.compliance.exported` twice: when it starts
 * (what and with which filters, so a client that goes away is still on record) and, with its digest,
 * when it ends.
 */
import { DirectoryPrincipals } from "../directory/Principals.ts"
import { makeRepo as makePolicyRepo } from "../policies/Repo.ts"
import { ruleView } from "../policies/Rules.ts"
import { PolicyEngine } from "../policies/Service.ts"
import { SqlClient } from "@effect/sql"
import { Chunk, Context, Effect, Layer, Option, Queue, Stream } from "effect"
import * as jose from "jose"
import { createHash, createPrivateKey } from "node:crypto"
import { Config } from "../Config.ts"
import { AuditChain, canonicalJson } from "../platform/AuditChain.ts"
import { newId } from "../platform/Ids.ts"
import { Keys } from "../platform/Keys.ts"
import { nowMillis } from "../platform/Time.ts"
import {
  type AuditRow, csvHeaderRow, detach, envelopeEnd, envelopeHead, type ExportKind, type ExportProof, type ExportStart, type GrantRow,
  isContiguous, proofPayload, rowsText, type StreamFormat
} from "./Format.ts"
import { iso } from "./Params.ts"
import { type AuditFilters, makeRepo, NDJSON_PAGE, PAGE, type Repo } from "./Repo.ts"

export interface AuditQuery extends AuditFilters {
  readonly since?: Date | undefined
  readonly until?: Date | undefined
  /** the last seq a job reads (the head when it was requested) */
  readonly atSeq?: number | undefined
}
export interface GrantQuery {
  readonly since?: Date | undefined
  readonly until?: Date | undefined
  readonly status?: string | undefined
}



const filtersOf = (q: AuditFilters): Record<string, string> => {
  const out: Record<string, string> = {}
  if (q.agentId !== undefined) out.agentId = q.agentId
  if (q.status !== undefined) out.status = q.status
  if (q.action !== undefined) out.action = q.action
  return out
}

export interface ExportResult {
  readonly sha256: string
  readonly rows: Record<string, number>
  readonly signature: string
}

/** The active Cedar set as the evidence pack shows it (§15: its id, version, digest and text). */
export interface CedarSetView {
  readonly bundleId: string
  readonly version: string
  readonly sha256: string
  readonly policyCount: number
  readonly createdAt: string
  readonly text: string
}

export interface ExportOptions {
  readonly exportId?: string | undefined
  /** the one-file form: a first line with the start, a last line with the proof */
  readonly envelope?: boolean | undefined
  /** write the start entry (inline exports; a job's was written when it was created) */
  readonly recordStart?: boolean | undefined
  /** sees the digest, row count and signature once the proof is stored */
  readonly onDone?: ((result: ExportResult) => Effect.Effect<void>) | undefined
}

/** an export ready to stream: what its response headers carry, and its bytes */
export interface OpenedExport {
  readonly start: ExportStart
  readonly stream: Stream.Stream<Uint8Array>
}

export interface ComplianceService {
  readonly repo: Repo
  readonly issuer: string
  readonly kid: string
  /** compact JWS (RS256, the grant-token key) over the UTF-8 of `payload` */
  readonly sign: (payload: string) => Effect.Effect<string>
  readonly recordExport: (developerId: string, metadata: Record<string, unknown>) => Effect.Effect<void>
  /** the developer's policy rules (as the API shows them), read through the policy engine */
  readonly policies: (developerId: string) => Effect.Effect<ReadonlyArray<ReturnType<typeof ruleView>>>
  /** the developer's active Cedar set, or null */
  readonly activeCedar: (developerId: string) => Effect.Effect<CedarSetView | null>
  /** the stored proof of a finished NDJSON/CSV export, and when it was stored */
  readonly proofOf: (developerId: string, exportId: string) => Effect.Effect<{ readonly proof: ExportProof; readonly storedAt: Date } | undefined>
  /** directory counts, read through the directory's service */
  readonly directoryCounts: (developerId: string) => Effect.Effect<{ readonly users: number; readonly deprovisioned: number }>
  /** records the start on the audit chain and returns the export's headers' facts and its body */
  readonly openExport: (
    developerId: string,
    kind: ExportKind,
    format: StreamFormat,
    query: AuditQuery & GrantQuery,
    options?: ExportOptions
  ) => Effect.Effect<OpenedExport>
  /** a job's file: `openExport`'s body as one stream (rows only, no start entry); `onDone` sees the digest and row count */
  readonly exportStream: (
    developerId: string,
    kind: ExportKind,
    format: StreamFormat,
    query: AuditQuery & GrantQuery,
    exportId?: string,
    onDone?: (result: ExportResult) => Effect.Effect<void>
  ) => Stream.Stream<Uint8Array>
  /** wakes the job fiber (a job was created) */
  readonly nudge: Effect.Effect<void>
  readonly wake: Queue.Queue<void>
}

export class Compliance extends Context.Tag("agent-auth/Compliance")<Compliance, ComplianceService>() {}

export const ComplianceLive = Layer.effect(
  Compliance,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const keys = yield* Keys
    const chain = yield* AuditChain
    const config = yield* Config
    const engine = yield* PolicyEngine
    const directory = yield* DirectoryPrincipals
    const repo = makeRepo(sql)
    const privateKey = createPrivateKey(keys.privateKeyPem())
    const wake = yield* Queue.sliding<void>(1)

    const sign = (payload: string) =>
      Effect.promise(() =>
        new jose.CompactSign(new TextEncoder().encode(payload))
          .setProtectedHeader({ alg: "RS256", kid: keys.kid, typ: "service-export+jws" })
          .sign(privateKey)
      )

    const recordExport = (developerId: string, metadata: Record<string, unknown>) =>
      chain.append({ developerId, action: "service.compliance.exported", metadata }).pipe(Effect.asVoid)

    const policyRepo = makePolicyRepo(sql)
    const activeCedar = (developerId: string) =>
      policyRepo.activeBundle(developerId, "cedar").pipe(
        Effect.orDie,
        Effect.map((row): CedarSetView | null =>
          row === undefined ? null : {
            bundleId: row.id, version: row.version, sha256: row.sha256, policyCount: Number(row.policyCount),
            createdAt: row.createdAt.toISOString(), text: Buffer.from(row.content).toString("utf8")
          })
      )

    const proofOf = (developerId: string, exportId: string) =>
      Effect.map(
        repo.q<{ proof: ExportProof | string; createdAt: Date }>(
          `SELECT proof, created_at FROM compliance_export_proofs WHERE id = $1 AND developer_id = $2`, [exportId, developerId]),
        ([row]) => row === undefined ? undefined : {
          proof: (typeof row.proof === "string" ? JSON.parse(row.proof) : row.proof) as ExportProof,
          storedAt: row.createdAt
        }
      )

    /**
     * Signs and stores the proof with the end entry, in one transaction. A re-run of a job (its instance
     * died after this committed, before the job was marked complete) replaces its proof and writes no
     * second end entry: the re-run reads the same rows (the chain as it stood at the request).
     */
    const finish = (developerId: string, start: ExportStart, rows: number, sha256: string, lastHash: string | null, ms: number) =>
      Effect.gen(function*() {
        const unsigned = { ...start, status: "complete" as const, rows, sha256, lastHash, kid: keys.kid }
        const signature = detach(yield* sign(proofPayload(unsigned)))
        const proof: ExportProof = { ...unsigned, signature }
        yield* sql.withTransaction(Effect.gen(function*() {
          const [stored] = yield* repo.q<{ first: boolean }>(`
            INSERT INTO compliance_export_proofs (id, developer_id, proof, created_at) VALUES ($1, $2, $3::jsonb, $4)
            ON CONFLICT (id) DO UPDATE SET proof = EXCLUDED.proof, created_at = EXCLUDED.created_at
            RETURNING (xmax = 0) AS first`,
            [start.exportId, developerId, JSON.stringify(proof), new Date(ms)])
          if (stored?.first !== false) {
            yield* recordExport(developerId, { exportId: start.exportId, kind: start.kind, format: start.format, stage: "completed", rows, sha256 })
          }
        })).pipe(Effect.orDie)
        return proof
      })

    const openExport = (
      developerId: string,
      kind: ExportKind,
      format: StreamFormat,
      query: AuditQuery & GrantQuery,
      options: ExportOptions = {}
    ): Effect.Effect<OpenedExport> =>
      Effect.gen(function*() {
        const ms = yield* nowMillis
        const exportId = options.exportId ?? newId("cexp", ms)
        const hasher = createHash("sha256")
        let rows = 0
        let lastHash: string | null = null
        const emit = (text: string): Uint8Array => {
          const bytes = Buffer.from(text, "utf8")
          hasher.update(bytes)
          return bytes
        }
        const base = {
          exportId, kind, format, issuer: config.jwtIssuer, developerId, generatedAt: new Date(ms).toISOString(),
          since: iso(query.since), until: iso(query.until)
        }
        let start: ExportStart
        let body: Stream.Stream<Uint8Array>
        if (kind === "audit") {
          // the range is read first: the start entry below lies outside it
          const range = yield* repo.auditRange(developerId, query.since, query.until, query.atSeq)
          start = { ...base, filters: filtersOf(query), anchor: range.anchor }
          lastHash = isContiguous(start) ? range.anchor : null
          body = format === "ndjson"
            ? Stream.paginateChunkEffect(range.first - 1, (after) =>
              repo.auditNdjsonPage(developerId, after, range.last, query).pipe(Effect.map((page) => {
                rows += page.rows
                if (page.rows === 0) return [Chunk.empty<Uint8Array>(), Option.none()] as const
                lastHash = page.lastHash
                return [Chunk.of(emit(page.text)), page.rows < NDJSON_PAGE ? Option.none() : Option.some(page.lastSeq)] as const
              })))
            : Stream.paginateChunkEffect(range.first - 1, (after) =>
            repo.auditPage(developerId, after, range.last, query).pipe(Effect.map((page: ReadonlyArray<AuditRow>) => {
              rows += page.length
              if (page.length > 0) lastHash = page[page.length - 1]!.hash
              const chunk = page.length === 0 ? Chunk.empty<Uint8Array>() : Chunk.of(emit(rowsText(kind, format, page)))
              return [chunk, page.length < PAGE ? Option.none() : Option.some(page[page.length - 1]!.seq)] as const
            })))
        } else {
          start = { ...base, filters: query.status === undefined ? {} : { status: query.status }, anchor: null }
          body = Stream.paginateChunkEffect(undefined as { createdAt: Date; id: string } | undefined, (after) =>
            repo.grantPage(developerId, after, query.since, query.until, query.status, ms).pipe(Effect.map((page) => {
              rows += page.length
              const chunk = page.length === 0
                ? Chunk.empty<Uint8Array>()
                : Chunk.of(emit(rowsText(kind, format, page.map((p): GrantRow => p.row))))
              return [chunk, page.length < PAGE ? Option.none() : Option.some(page[page.length - 1]!.key)] as const
            })))
        }
        if (options.recordStart) {
          yield* recordExport(developerId, {
            exportId, kind, format, stage: "started", since: start.since, until: start.until, filters: start.filters
          })
        }
        if (format === "csv") body = Stream.concat(Stream.sync(() => emit(csvHeaderRow(kind))), body)
        const end = Stream.unwrap(Effect.gen(function*() {
          const proof = yield* finish(developerId, start, rows, hasher.digest("hex"), kind === "audit" ? lastHash : null, ms)
          if (options.onDone) {
            yield* options.onDone({ sha256: proof.sha256, rows: { [kind === "audit" ? "entries" : "grants"]: rows }, signature: proof.signature })
          }
          return options.envelope ? Stream.make(Buffer.from(envelopeEnd(proof), "utf8") as Uint8Array) : Stream.empty
        }))
        const head = options.envelope ? Stream.sync(() => Buffer.from(envelopeHead(start), "utf8") as Uint8Array) : Stream.empty
        return { start: start!, stream: Stream.concat(Stream.concat(head, body), end) }
      })

    const exportStream = (
      developerId: string,
      kind: ExportKind,
      format: StreamFormat,
      query: AuditQuery & GrantQuery,
      givenId?: string,
      onDone?: (result: ExportResult) => Effect.Effect<void>
    ): Stream.Stream<Uint8Array> =>
      Stream.unwrap(Effect.gen(function*() {
        const atSeq = givenId === undefined ? undefined : yield* repo.jobAtSeq(givenId)
        const opened = yield* openExport(developerId, kind, format, { ...query, atSeq }, { exportId: givenId, onDone })
        return opened.stream
      }))

    return {
      repo,
      policies: (developerId: string) => Effect.map(engine.load(developerId), (loaded) => loaded.rules.map(ruleView)),
      activeCedar,
      proofOf,
      directoryCounts: directory.counts,
      issuer: config.jwtIssuer,
      kid: keys.kid,
      sign,
      recordExport,
      openExport,
      exportStream,
      nudge: Queue.offer(wake, undefined).pipe(Effect.asVoid),
      wake
    } satisfies ComplianceService
  })
)

/** sha256 hex of the canonical JSON of a value (what manifests and JSON pages sign) */
export const digestOf = (value: unknown) => createHash("sha256").update(canonicalJson(value)).digest("hex")
