/**
 * Export jobs (decisions §15, ours): created by POST /v1/compliance/exports, run by the job fiber
 * (Worker.ts), kept 7 days after they complete, then 410 GONE. Each job is run under its own lease
 * (platform/Leases.ts), renewed while it runs however slowly it writes, so two instances never run
 * it at once; its chunks and its completion commit only while the lease is still its own. A job
 * whose instance died is claimed again once the lease runs out and run from the start (its partial
 * chunks are replaced); after MAX_ATTEMPTS claims that failed or never finished it is `failed`.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import { ExportNotReady, Gone, NotFound, RateLimited } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { type Claim, guardLease, heldSql, withLease } from "../platform/Leases.ts"
import { nowMillis } from "../platform/Time.ts"
import { packStream, type Framework } from "./Pack.ts"
import { iso, type Window } from "./Params.ts"
import { Compliance, type ExportResult } from "./Service.ts"
import { dpdpStream, type DpdpParams } from "./Dpdp.ts"

export const RETENTION_MS = 7 * 86_400_000
export const LEASE_KIND = "compliance.export"
export const LEASE_MS = 60_000
export const CHUNK_BYTES = 1024 * 1024
export const JOBS_PER_HOUR = 5
export const RUNNING_PER_DEVELOPER = 3
export const MAX_ATTEMPTS = 3
/** what a failed job says (nothing of the cause: that is logged and kept on its lease) */
const FAILED_ERROR = "the export could not be produced"

export type JobKind = "evidence-pack" | "grants" | "audit" | "dpdp"

export interface JobParams {
  readonly since: string | null
  readonly until: string | null
  readonly framework?: Framework
  readonly filters?: Record<string, string>
  readonly dpdp?: DpdpParams
}

export const createJob = (developerId: string, kind: JobKind, format: string, params: JobParams, givenId?: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const svc = yield* Compliance
    const ms = yield* nowMillis
    const id = givenId ?? newId("cexp", ms)
    // the limits are counted and the job inserted under one lock per developer, so concurrent creates cannot pass them together
    yield* sql.withTransaction(Effect.gen(function*() {
      yield* svc.repo.q(`SELECT pg_advisory_xact_lock(hashtext('compliance.export.create'), hashtext($1))`, [developerId])
      const [counts] = yield* svc.repo.q<{ hour: string; open: string }>(`
        SELECT count(*) FILTER (WHERE created_at > $2) AS hour, count(*) FILTER (WHERE status IN ('pending', 'running')) AS open
        FROM compliance_exports WHERE developer_id = $1 AND (created_at > $2 OR status IN ('pending', 'running'))`,
        [developerId, new Date(ms - 3_600_000)])
      if (Number(counts!.hour) >= JOBS_PER_HOUR || Number(counts!.open) >= RUNNING_PER_DEVELOPER) {
        return yield* Effect.fail(new RateLimited({
          message: `At most ${JOBS_PER_HOUR} export jobs an hour and ${RUNNING_PER_DEVELOPER} unfinished at a time; try again later`
        }))
      }
      yield* svc.repo.q(`
        INSERT INTO compliance_exports (id, developer_id, kind, format, params, status, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5::jsonb, 'pending', $6, $6)`, [id, developerId, kind, format, JSON.stringify(params), new Date(ms)])
    })).pipe(Effect.catchTag("SqlError", Effect.die))
    yield* svc.nudge
    return { id, status: "pending" as const }
  })

export const jobView = (row: any, nowMs: number) => {
  const expired = row.status === "complete" && row.expiresAt !== null && row.expiresAt.getTime() <= nowMs
  return {
    id: row.id as string,
    kind: row.kind as string,
    format: row.format as string,
    status: (expired ? "expired" : row.status) as "pending" | "running" | "complete" | "failed" | "expired",
    rowCounts: (row.rowCounts ?? null) as Record<string, number> | null,
    sha256: (row.sha256 ?? null) as string | null,
    signature: (row.signature ?? null) as string | null,
    bytes: row.bytes === null ? null : Number(row.bytes),
    createdAt: row.createdAt.toISOString() as string,
    completedAt: iso(row.completedAt ?? undefined),
    expiresAt: iso(row.expiresAt ?? undefined),
    error: (row.error ?? null) as string | null
  }
}

export const getJob = (developerId: string, id: string) =>
  Effect.gen(function*() {
    const svc = yield* Compliance
    const [row] = yield* svc.repo.q(`SELECT * FROM compliance_exports WHERE id = $1 AND developer_id = $2`, [id, developerId])
    if (row === undefined) return yield* Effect.fail(new NotFound({ message: "Export not found" }))
    return row
  })

/** the stored file, chunk by chunk (one chunk in memory at a time) */
export const jobFile = (developerId: string, id: string) =>
  Effect.gen(function*() {
    const svc = yield* Compliance
    const row = yield* getJob(developerId, id)
    const view = jobView(row, yield* nowMillis)
    if (view.status === "expired") {
      return yield* Effect.fail(new Gone({ message: "The export's result was kept 7 days and has been deleted" }))
    }
    if (view.status !== "complete") {
      return yield* Effect.fail(new ExportNotReady({ message: `The export is ${view.status}; download it once it is complete` }))
    }
    const chunks = Number(row.chunks)
    const stream = Stream.paginateEffect(0, (n: number) =>
      svc.repo.q<{ data: Uint8Array }>(`SELECT data FROM compliance_export_chunks WHERE export_id = $1 AND n = $2`, [id, n]).pipe(
        Effect.map(([c]) => [c?.data ?? new Uint8Array(0), n + 1 < chunks ? Option.some(n + 1) : Option.none()] as const)
      ))
    return { view, stream: chunks === 0 ? Stream.empty : stream }
  })

const windowOf = (p: JobParams): Window => ({
  since: p.since === null ? undefined : new Date(p.since),
  until: p.until === null ? undefined : new Date(p.until)
})

/** The file a job produces: the very stream the inline routes send. */
const jobStream = (job: any, onDone: (r: ExportResult) => Effect.Effect<void>) =>
  Effect.gen(function*() {
    const svc = yield* Compliance
    const params = job.params as JobParams
    const window = windowOf(params)
    if (job.kind === "evidence-pack") {
      const [dev] = yield* svc.repo.q<{ plan: string }>(`SELECT plan FROM developers WHERE id = $1`, [job.developerId])
      return packStream(svc, { id: job.developerId, plan: dev!.plan }, window, params.framework ?? "all", job.id, onDone)
    }
    if (job.kind === "dpdp") return dpdpStream(svc, job.developerId, params.dpdp!, job.id, onDone)
    return svc.exportStream(job.developerId, job.kind, job.format, { ...window, ...params.filters }, job.id, onDone)
  })

/** One round of the job fiber: drop expired results, claim due jobs one by one, run them. Tests drive it directly. */
export const runDueJobs = (limit = 2) =>
  Effect.gen(function*() {
    const svc = yield* Compliance
    const now = new Date(yield* nowMillis)
    yield* svc.repo.q(`DELETE FROM compliance_export_chunks WHERE export_id IN (
      SELECT id FROM compliance_exports WHERE status = 'complete' AND expires_at <= $1 AND chunks > 0)`, [now])
    yield* svc.repo.q(`DELETE FROM leases WHERE kind = $2 AND key IN (
      SELECT id FROM compliance_exports WHERE status = 'complete' AND expires_at <= $1 AND chunks > 0)`, [now, LEASE_KIND])
    yield* svc.repo.q(`UPDATE compliance_exports SET chunks = 0 WHERE status = 'complete' AND expires_at <= $1 AND chunks > 0`, [now])
    // candidates only: each is claimed by its own lease just before it runs
    const due = yield* svc.repo.q<{ id: string }>(`
      SELECT j.id FROM compliance_exports j
      WHERE j.status IN ('pending', 'running') AND NOT ${heldSql("$2", "j.id", "$1")}
      ORDER BY j.created_at LIMIT $3`, [now, LEASE_KIND, limit])
    let claimed = 0
    let completed = 0
    for (const { id } of due) {
      const outcome = yield* withLease(LEASE_KIND, id, { leaseMs: LEASE_MS, maxAttempts: MAX_ATTEMPTS }, (claim) => runJob(id, claim))
      switch (outcome._tag) {
        case "Busy":
        case "Lost":
          break
        case "Done":
          if (outcome.value === "not-due") break
          claimed++
          completed++
          break
        case "Failed":
          claimed++
          yield* Effect.logWarning("export job failed; it will be tried again").pipe(
            Effect.annotateLogs({ exportId: id, attempt: outcome.attempts, error: outcome.error }))
          break
        case "Exhausted": {
          // the attempts cap: this attempt failed too, or the earlier ones never finished (their instances died)
          if (outcome.ran) claimed++
          yield* Effect.logWarning("export job failed").pipe(Effect.annotateLogs({ exportId: id, attempts: outcome.attempts, error: outcome.error }))
          const error = outcome.ran ? FAILED_ERROR : `${FAILED_ERROR}: ${outcome.attempts} attempts did not finish`
          yield* svc.repo.q(`UPDATE compliance_exports SET status = 'failed', error = $2, updated_at = $3 WHERE id = $1 AND status IN ('pending', 'running')`,
            [id, error, new Date(yield* nowMillis)])
        }
      }
    }
    return { claimed, completed }
  })

/** Runs one claimed job from the start; "not-due" when another instance finished it meanwhile. */
const runJob = (id: string, claim: Claim) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const svc = yield* Compliance
    const [job] = yield* svc.repo.q<any>(`
      UPDATE compliance_exports SET status = 'running', updated_at = $2 WHERE id = $1 AND status IN ('pending', 'running') RETURNING *`,
      [id, new Date(yield* nowMillis)])
    if (job === undefined) return "not-due" as const
    const whole = createHash("sha256")
    let n = 0
    let bytes = 0
    let pending: Array<Uint8Array> = []
    let pendingBytes = 0
    let result: ExportResult | undefined
    // a run starts from nothing: chunks of an earlier, crashed run are replaced
    yield* svc.repo.q(`DELETE FROM compliance_export_chunks WHERE export_id = $1`, [job.id])
    const flush = Effect.suspend(() => {
      if (pendingBytes === 0) return Effect.void
      const data = Buffer.concat(pending)
      pending = []
      pendingBytes = 0
      // the lease is renewed by its own heartbeat; each chunk commits only while it is still ours
      return sql.withTransaction(Effect.zipRight(
        guardLease(claim),
        svc.repo.q(`INSERT INTO compliance_export_chunks (export_id, n, data) VALUES ($1, $2, $3)`, [job.id, n, data])
      )).pipe(Effect.tap(() => Effect.sync(() => {
        n++
        bytes += data.length
      })))
    })
    const stream = yield* jobStream(job, (r) => Effect.sync(() => { result = r }))
    yield* Stream.runForEach(stream, (piece) => {
      whole.update(piece)
      pending.push(piece)
      pendingBytes += piece.length
      return pendingBytes >= CHUNK_BYTES ? flush : Effect.void
    })
    yield* flush
    const at = yield* nowMillis
    yield* sql.withTransaction(Effect.zipRight(
      guardLease(claim),
      svc.repo.q(`
        UPDATE compliance_exports SET status = 'complete', row_counts = $2::jsonb, sha256 = $3, signature = $4,
               bytes = $5, chunks = $6, completed_at = $7, expires_at = $8, updated_at = $7, error = NULL
        WHERE id = $1`,
        [job.id, JSON.stringify(result!.rows), whole.digest("hex"), result!.signature, bytes, n, new Date(at), new Date(at + RETENTION_MS)])
    ))
    return "complete" as const
  })
