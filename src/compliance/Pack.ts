/**
 * The evidence pack (decisions §15), written as a stream: every section is emitted as its canonical
 * JSON (sorted keys, no spaces), so the bytes in the file are the bytes its manifest digest covers,
 * and the audit entries are checked (hash and link, from the anchor) as they pass. The manifest
 * lists every section (meta and chainIntegrity too, so the anchor and the issuer are signed), and
 * `signature` is a compact JWS whose payload is the manifest's canonical JSON. `policies` is
 * `{ rules, cedar }`: the rules as the API shows them and the active Cedar set with its text (or null);
 * its manifest `rows` counts the rules and the set.
 */
import { Chunk, Effect, Option, Stream } from "effect"
import { createHash } from "node:crypto"
import { canonicalJson, checkEntry } from "../platform/AuditChain.ts"
import { ExportTooLarge } from "../platform/Errors.ts"
import { nowMillis } from "../platform/Time.ts"
import type { AuditRow } from "./Format.ts"
import { iso, type Window } from "./Params.ts"
import { PAGE } from "./Repo.ts"
import type { ComplianceService } from "./Service.ts"
import { summaryOf } from "./Summary.ts"

export const INLINE_MAX_ENTRIES = 50_000
export type Framework = "soc2" | "gdpr" | "dpdp" | "all"

/** 413 EXPORT_TOO_LARGE when the window holds more than the inline limit (checked before any byte is sent) */
export const checkInlineSize = (svc: ComplianceService, developerId: string, window: Window) =>
  Effect.gen(function*() {
    const range = yield* svc.repo.auditRange(developerId, window.since, window.until)
    const entries = Math.max(0, range.last - range.first + 1)
    if (entries > INLINE_MAX_ENTRIES) {
      return yield* Effect.fail(new ExportTooLarge({
        message: `The window holds ${entries} audit entries, above the inline limit of ${INLINE_MAX_ENTRIES}: ` +
          "create an export job instead (POST /v1/compliance/exports with kind evidence-pack)"
      }))
    }
  })

export const packStream = (
  svc: ComplianceService,
  developer: { id: string; plan: string },
  window: Window,
  framework: Framework,
  exportId: string,
  onDone?: (result: { sha256: string; rows: Record<string, number>; signature: string }) => Effect.Effect<void>,
  /** inline packs: the start goes on the chain here (a job's was written when it was created) */
  recordStart = false
): Stream.Stream<Uint8Array> =>
  Stream.unwrap(Effect.gen(function*() {
    const repo = svc.repo
    const ms = yield* nowMillis
    // a job reads the chain as it stood when it was requested (its start entry lies after it)
    const atSeq = recordStart ? undefined : yield* repo.jobAtSeq(exportId)
    const range = yield* repo.auditRange(developer.id, window.since, window.until, atSeq)
    const files: Array<{ name: string; sha256: string; rows: number }> = []
    const whole = createHash("sha256")
    const out = (text: string): Uint8Array => {
      const bytes = Buffer.from(text, "utf8")
      whole.update(bytes)
      return bytes
    }
    /** a section known up front: `"name":<canonical>` */
    const section = (name: string, value: unknown, rows: number, first = false) => {
      const text = canonicalJson(value)
      files.push({ name, sha256: createHash("sha256").update(text).digest("hex"), rows })
      return out(`${first ? "{" : ","}${JSON.stringify(name)}:${text}`)
    }
    /** a streamed array section: its digest is updated row by row */
    const arraySection = <K, R>(name: string, start: K, page: (after: K) => Effect.Effect<ReadonlyArray<{ row: R; key: K }>>,
      check?: (rows: ReadonlyArray<R>) => void) => {
      const hash = createHash("sha256")
      let count = 0
      const piece = (text: string) => { hash.update(text); return out(text) }
      const open = Stream.sync(() => { hash.update("["); return out(`,${JSON.stringify(name)}:[`) })
      const body = Stream.paginateChunkEffect(start, (after) =>
        page(after).pipe(Effect.map((items) => {
          check?.(items.map((i) => i.row))
          let text = ""
          for (const item of items) text += (count++ === 0 ? "" : ",") + canonicalJson(item.row)
          const chunk = text === "" ? Chunk.empty<Uint8Array>() : Chunk.of(piece(text))
          return [chunk, items.length < PAGE ? Option.none<K>() : Option.some(items[items.length - 1]!.key)] as const
        })))
      const close = Stream.sync(() => {
        const bytes = piece("]")
        files.push({ name, sha256: hash.digest("hex"), rows: count })
        return bytes
      })
      return Stream.concat(Stream.concat(open, body), close)
    }

    const meta = {
      schemaVersion: "1.0", generatedAt: new Date(ms).toISOString(), since: iso(window.since), until: iso(window.until),
      framework, issuer: svc.issuer, exportId, developerId: developer.id
    }
    const summary = yield* summaryOf(svc, developer, window, ms)
    // the rules and the active Cedar set (id, version, digest and text): everything that decided
    const rules = yield* svc.policies(developer.id)
    const cedar = yield* svc.activeCedar(developer.id)
    const policies = { rules, cedar }
    const breachParams: Array<unknown> = [developer.id]
    let breachWhere = ""
    if (window.since !== undefined) { breachParams.push(window.since); breachWhere += ` AND created_at >= $${breachParams.length}` }
    if (window.until !== undefined) { breachParams.push(window.until); breachWhere += ` AND created_at <= $${breachParams.length}` }
    // the register without principal ids or free text
    const breaches = (yield* repo.q<any>(`
      SELECT id, status, aware_at, occurred_at, affected_count, board_initial_intimation_sent_at, board_detailed_report_sent_at,
             created_at, closed_at
      FROM breaches WHERE developer_id = $1${breachWhere} ORDER BY created_at, id`, breachParams)).map((b) => ({
        breachId: b.id, status: b.status, awareAt: iso(b.awareAt), occurredAt: iso(b.occurredAt ?? undefined),
        affectedCount: b.affectedCount, boardInitialIntimationSentAt: iso(b.boardInitialIntimationSentAt ?? undefined),
        boardDetailedReportSentAt: iso(b.boardDetailedReportSentAt ?? undefined), createdAt: iso(b.createdAt),
        closedAt: iso(b.closedAt ?? undefined)
      }))
    // the stored head: does the row at the head's seq still carry the head's hash (nothing cut off the end)?
    const [tip] = range.headSeq === 0
      ? [undefined]
      : yield* repo.q<{ hash: string }>(`SELECT hash FROM audit_log WHERE developer_id = $1 AND seq = $2`, [developer.id, range.headSeq])
    const integrity = { valid: true, checkedEntries: 0, firstBrokenAt: null as string | null, prev: range.anchor, lastSeq: range.first - 1 }
    const checkEntries = (rows: ReadonlyArray<AuditRow>) => {
      for (const e of rows) {
        if (!integrity.valid) return
        const { seq, entryId, hash, ...fields } = e
        if (seq !== integrity.lastSeq + 1 || e.prevHash !== integrity.prev || !checkEntry({ id: entryId, hash, ...fields }).ok) {
          integrity.valid = false
          integrity.firstBrokenAt = entryId
          return
        }
        integrity.prev = hash
        integrity.lastSeq = seq
        integrity.checkedEntries++
      }
    }

    // on the chain before the first byte (after the range was read), so a client that goes away is still on record
    if (recordStart) {
      yield* svc.recordExport(developer.id, {
        exportId, kind: "evidence-pack", format: "json", stage: "started", framework, since: meta.since, until: meta.until
      })
    }

    const head = Stream.sync(() =>
      Buffer.concat([
        section("meta", meta, 1, true),
        section("summary", summary, 1),
        section("policies", policies, rules.length + (cedar === null ? 0 : 1)),
        section("breaches", breaches, breaches.length)
      ]) as Uint8Array)
    const grants = arraySection("grants", undefined as { createdAt: Date; id: string } | undefined, (after) =>
      repo.grantPage(developer.id, after, window.since, window.until, undefined, ms))
    const audit = arraySection("auditEntries", range.first - 1, (after) =>
      repo.auditPage(developer.id, after, range.last, {}).pipe(Effect.map((rows) => rows.map((row) => ({ row, key: row.seq })))),
      checkEntries)
    const tail = Stream.fromEffect(Effect.gen(function*() {
      const headMatchesStored = range.headSeq === 0
        ? range.headHash === null
        : tip?.hash === range.headHash && (range.last < range.headSeq || integrity.prev === range.headHash)
      const chainIntegrity = {
        valid: integrity.valid && integrity.lastSeq === Math.max(range.last, range.first - 1),
        checkedEntries: integrity.checkedEntries,
        firstBrokenAt: integrity.firstBrokenAt,
        anchorHash: range.anchor,
        headHash: range.headHash,
        headMatchesStored
      }
      const integrityBytes = section("chainIntegrity", chainIntegrity, 1)
      const manifest = { files }
      const signature = yield* svc.sign(canonicalJson(manifest))
      const rest = out(`,"manifest":${canonicalJson(manifest)},"signature":${JSON.stringify(signature)}}`)
      const rows = Object.fromEntries(files.map((f) => [f.name, f.rows]))
      const sha256 = whole.digest("hex")
      yield* svc.recordExport(developer.id, { exportId, kind: "evidence-pack", format: "json", stage: "completed", framework, rows, sha256 })
      if (onDone) yield* onDone({ sha256, rows, signature })
      return Buffer.concat([integrityBytes, rest]) as Uint8Array
    }))
    return Stream.concat(Stream.concat(Stream.concat(head, grants), audit), tail)
  }))
