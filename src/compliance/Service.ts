/**
 * Compliance exports (decisions §15): streamed audit and grant exports (NDJSON, CSV), their JSON
 * pages, the summary, and the signer every export shares. Streams read keyset pages (Repo.ts) and
 * hash as they write, so memory stays at one page and the first byte does not wait for the last row.
 * Every export is written to the audit chain as `service.compliance.exported` with its digest.
 */
import { DirectoryPrincipals } from "../directory/Principals.ts"
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
  type AuditRow, type ExportHeader, type ExportKind, type GrantRow, headerText, rowsText, signedTrailer, type StreamFormat,
  trailerText
} from "./Format.ts"
import { iso } from "./Params.ts"
import { type AuditFilters, makeRepo, NDJSON_PAGE, PAGE, type Repo } from "./Repo.ts"

export interface AuditQuery extends AuditFilters {
  readonly since?: Date | undefined
  readonly until?: Date | undefined
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

export interface ComplianceService {
  readonly repo: Repo
  readonly issuer: string
  readonly kid: string
  /** compact JWS (RS256, the grant-token key) over the UTF-8 of `payload` */
  readonly sign: (payload: string) => Effect.Effect<string>
  readonly recordExport: (developerId: string, metadata: Record<string, unknown>) => Effect.Effect<void>
  /** the developer's policy rules (as the API shows them), read through the policy engine */
  readonly policies: (developerId: string) => Effect.Effect<ReadonlyArray<ReturnType<typeof ruleView>>>
  /** directory counts, read through the directory's service */
  readonly directoryCounts: (developerId: string) => Effect.Effect<{ readonly users: number; readonly deprovisioned: number }>
  /** the whole export file as a stream of byte chunks; `onDone` sees the digest and row count */
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

    const exportStream = (
      developerId: string,
      kind: ExportKind,
      format: StreamFormat,
      query: AuditQuery & GrantQuery,
      givenId?: string,
      onDone?: (result: ExportResult) => Effect.Effect<void>
    ): Stream.Stream<Uint8Array> =>
      Stream.unwrap(Effect.gen(function*() {
        const ms = yield* nowMillis
        const exportId = givenId ?? newId("cexp", ms)
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
        let header: ExportHeader
        let body: Stream.Stream<Uint8Array>
        if (kind === "audit") {
          const range = yield* repo.auditRange(developerId, query.since, query.until)
          const filters = filtersOf(query)
          const contiguous = Object.keys(filters).length === 0
          header = { ...base, filters, contiguous, anchor: range.anchor }
          lastHash = contiguous ? range.anchor : null
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
          header = { ...base, filters: query.status === undefined ? {} : { status: query.status } }
          body = Stream.paginateChunkEffect(undefined as { createdAt: Date; id: string } | undefined, (after) =>
            repo.grantPage(developerId, after, query.since, query.until, query.status, ms).pipe(Effect.map((page) => {
              rows += page.length
              const chunk = page.length === 0
                ? Chunk.empty<Uint8Array>()
                : Chunk.of(emit(rowsText(kind, format, page.map((p): GrantRow => p.row))))
              return [chunk, page.length < PAGE ? Option.none() : Option.some(page[page.length - 1]!.key)] as const
            })))
        }
        const trailer = Stream.fromEffect(Effect.gen(function*() {
          const sha256 = hasher.digest("hex")
          const signature = yield* sign(signedTrailer(header, rows, sha256, kind === "audit" ? lastHash : undefined))
          yield* recordExport(developerId, { exportId, kind, format, rows, sha256 })
          if (onDone) yield* onDone({ sha256, rows: { [kind === "audit" ? "entries" : "grants"]: rows }, signature })
          return Buffer.from(trailerText(format, {
            rows, sha256, ...(kind === "audit" ? { lastHash } : {}), kid: keys.kid, signature
          }), "utf8") as Uint8Array
        }))
        return Stream.concat(Stream.concat(Stream.sync(() => emit(headerText(header))), body), trailer)
      }))

    return {
      repo,
      policies: (developerId: string) => Effect.map(engine.load(developerId), (loaded) => loaded.rules.map(ruleView)),
      directoryCounts: directory.counts,
      issuer: config.jwtIssuer,
      kid: keys.kid,
      sign,
      recordExport,
      exportStream,
      nudge: Queue.offer(wake, undefined).pipe(Effect.asVoid),
      wake
    } satisfies ComplianceService
  })
)

/** sha256 hex of the canonical JSON of a value (what manifests and JSON pages sign) */
export const digestOf = (value: unknown) => createHash("sha256").update(canonicalJson(value)).digest("hex")
