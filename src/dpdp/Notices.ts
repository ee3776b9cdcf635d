/**
 * Consent notices (decisions §21): immutable versions keyed by (developer, noticeId, version,
 * language). No route changes a version; retirement only stops new records from binding to it.
 * Each version carries its completeness against DPDP Rule 3 (what the notice lacks).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { AuditChain, canonicalJson } from "../platform/AuditChain.ts"
import { Conflict, NotFound, PlanLimitExceeded } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { type CursorPosition, toPage } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { InvalidNotice, NoticeHashMismatch, NoticeIncomplete, NoticeRetired } from "./Errors.ts"
import { readSettings } from "./SettingsRead.ts"
import { fail, httpsUrl, isObject, objectBody, pattern, type Purpose, purposes, sha256Hex, stringList, text, validated } from "./Validate.ts"

const NOTICE_ID = /^[A-Za-z0-9._:-]{1,100}$/
/** notice versions per developer by plan (decisions §21); enterprise has no cap */
export const NOTICE_VERSION_CAP: Record<string, number | undefined> = { free: 100, pro: 1000 }
const LANGUAGE = /^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/
export const RULE3_ITEMS = ["dataItems", "purposes", "withdrawal", "rights", "boardComplaint", "contact"] as const

export interface NoticeInput {
  readonly noticeId: string | undefined
  readonly version: string
  readonly language: string
  readonly title: string
  readonly content: string
  readonly purposes: ReadonlyArray<Purpose>
  readonly dataItems: ReadonlyArray<string>
  readonly dataFiduciaryContact: string | null
  readonly grievanceOfficer: { name: string; email: string; phone?: string } | null
  readonly withdrawalUrl: string | null
  readonly rightsUrl: string | null
  readonly boardComplaintUrl: string | null
}

const officer = (value: unknown): NoticeInput["grievanceOfficer"] => {
  if (value === undefined || value === null) return null
  if (!isObject(value)) return fail("grievanceOfficer", "grievanceOfficer must be an object { name, email, phone? }")
  const name = text(value, "name", 200, true)!
  const email = text(value, "email", 320, true)!
  if (!/^[^@\s]+@[^@\s]+$/.test(email)) fail("grievanceOfficer.email", "grievanceOfficer.email must be an email address")
  const phone = text(value, "phone", 50, false)
  return { name, email, ...(phone !== undefined ? { phone } : {}) }
}

export const parseNotice = (raw: unknown): NoticeInput => {
  const body = objectBody(raw)
  const content = text(body, "content", 65_536, true)!
  if (Buffer.byteLength(content, "utf8") > 65_536) fail("content", "content may be at most 64 KiB")
  const givenHash = text(body, "contentHash", 64, false)
  if (givenHash !== undefined && givenHash.toLowerCase() !== sha256Hex(content)) fail("contentHash", "contentHash is not the SHA-256 of content")
  return {
    noticeId: pattern(body, "noticeId", NOTICE_ID, false, "1 to 100 of A-Z a-z 0-9 . _ : -"),
    version: text(body, "version", 32, true)!,
    language: (() => {
      const l = text(body, "language", 35, false)
      if (l !== undefined && !LANGUAGE.test(l)) fail("language", "language must be a BCP 47 tag")
      return l ?? "en"
    })(),
    title: text(body, "title", 200, true)!,
    content,
    purposes: purposes(body),
    dataItems: body.dataItems === undefined || body.dataItems === null ? [] : stringList(body.dataItems, "dataItems", 200, 200),
    dataFiduciaryContact: text(body, "dataFiduciaryContact", 500, false) ?? null,
    grievanceOfficer: officer(body.grievanceOfficer),
    withdrawalUrl: httpsUrl(body, "withdrawalUrl") ?? null,
    rightsUrl: httpsUrl(body, "rightsUrl") ?? null,
    boardComplaintUrl: httpsUrl(body, "boardComplaintUrl") ?? null
  }
}

/** What Rule 3 asks that the notice lacks. */
export const missingItems = (n: Omit<NoticeInput, "noticeId">): Array<string> => {
  const missing: Array<string> = []
  if (n.dataItems.length === 0) missing.push("dataItems")
  if (n.purposes.length === 0) missing.push("purposes")
  if (n.withdrawalUrl === null) missing.push("withdrawal")
  if (n.rightsUrl === null) missing.push("rights")
  if (n.boardComplaintUrl === null) missing.push("boardComplaint")
  if (n.dataFiduciaryContact === null && n.grievanceOfficer === null) missing.push("contact")
  return missing
}

export const noticeDigestOf = (noticeId: string, n: Omit<NoticeInput, "noticeId">) =>
  sha256Hex(canonicalJson({
    noticeId, version: n.version, language: n.language, title: n.title, content: n.content, purposes: n.purposes,
    dataItems: n.dataItems, dataFiduciaryContact: n.dataFiduciaryContact, grievanceOfficer: n.grievanceOfficer,
    withdrawalUrl: n.withdrawalUrl, rightsUrl: n.rightsUrl, boardComplaintUrl: n.boardComplaintUrl
  }))

export interface NoticeRow {
  readonly id: string
  readonly noticeId: string
  readonly version: string
  readonly language: string
  readonly title: string
  readonly content: string
  readonly contentHash: string
  readonly noticeDigest: string
  readonly purposes: ReadonlyArray<Purpose>
  readonly dataItems: ReadonlyArray<string>
  readonly dataFiduciaryContact: string | null
  readonly grievanceOfficer: NoticeInput["grievanceOfficer"]
  readonly withdrawalUrl: string | null
  readonly rightsUrl: string | null
  readonly boardComplaintUrl: string | null
  readonly missing: ReadonlyArray<string>
  readonly retiredAt: Date | null
  readonly createdAt: Date
}

const COLUMNS = `id, notice_id, version, language, title, content, content_hash, notice_digest, purposes, data_items,
  data_fiduciary_contact, grievance_officer, withdrawal_url, rights_url, board_complaint_url, missing, retired_at, created_at`

export const noticeView = (n: NoticeRow, options: { content: boolean } = { content: false }) => ({
  id: n.id,
  noticeId: n.noticeId,
  version: n.version,
  language: n.language,
  title: n.title,
  ...(options.content ? { content: n.content } : {}),
  contentHash: n.contentHash,
  noticeDigest: n.noticeDigest,
  purposes: n.purposes,
  dataItems: [...n.dataItems],
  dataFiduciaryContact: n.dataFiduciaryContact,
  grievanceOfficer: n.grievanceOfficer,
  withdrawalUrl: n.withdrawalUrl,
  rightsUrl: n.rightsUrl,
  boardComplaintUrl: n.boardComplaintUrl,
  completeness: { rule3: n.missing.length === 0, missing: [...n.missing] },
  retiredAt: n.retiredAt?.toISOString() ?? null,
  createdAt: n.createdAt.toISOString()
})

export type NoticeView = ReturnType<typeof noticeView>

/** Which version a new record binds to (decisions §21). */
export interface NoticeChoice {
  readonly noticeId: string
  readonly version?: string | undefined
  readonly language: string
  readonly contentHash?: string | undefined
}

export const makeNotices = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const audit = yield* AuditChain
  const events = yield* Events

  const register = (developerId: string, body: unknown) =>
    Effect.gen(function*() {
      const input = yield* validated(() => parseNotice(body))
      const ms = yield* nowMillis
      const id = newId("notice", ms)
      const noticeId = input.noticeId ?? id
      const missing = missingItems(input)
      if (missing.length > 0 && (yield* readSettings(sql, developerId)).requireCompleteNotices) {
        return yield* Effect.fail(new NoticeIncomplete({
          message: `The notice lacks what DPDP Rule 3 asks: ${missing.join(", ")} (your requireCompleteNotices setting is on)`,
          details: missing.map((m) => ({ path: m, message: "missing (Rule 3)" }))
        }))
      }
      const row = yield* sql.withTransaction(Effect.gen(function*() {
        // the plan's cap on notice versions, counted under a per-developer lock (decisions §21)
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`dpdp-notices:${developerId}`}))`
        const [cap] = yield* sql<{ plan: string; versions: number }>`
          SELECT d.plan, (SELECT count(*)::int FROM dpdp_consent_notices n WHERE n.developer_id = d.id) AS versions
          FROM developers d WHERE d.id = ${developerId}`
        const limit = NOTICE_VERSION_CAP[cap?.plan ?? "free"]
        if (limit !== undefined && cap !== undefined && cap.versions >= limit) {
          return yield* Effect.fail(new PlanLimitExceeded({ message: `The ${cap.plan} plan allows ${limit} notice versions` }))
        }
        // only the unique key answers 409; any other failure is a 5xx
        const rows = yield* sql.unsafe<NoticeRow>(
          `INSERT INTO dpdp_consent_notices (id, developer_id, notice_id, version, language, title, content, content_hash, notice_digest,
             purposes, data_items, data_fiduciary_contact, grievance_officer, withdrawal_url, rights_url, board_complaint_url, missing, created_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11, $12, $13::jsonb, $14, $15, $16, $17, $18)
           ON CONFLICT (developer_id, notice_id, version, language) DO NOTHING RETURNING ${COLUMNS}`,
          [id, developerId, noticeId, input.version, input.language, input.title, input.content, sha256Hex(input.content),
            noticeDigestOf(noticeId, input), JSON.stringify(input.purposes), [...input.dataItems] as any, input.dataFiduciaryContact,
            input.grievanceOfficer === null ? null : JSON.stringify(input.grievanceOfficer), input.withdrawalUrl, input.rightsUrl,
            input.boardComplaintUrl, missing as any, new Date(ms)]
        )
        const row = rows[0]
        if (row === undefined) {
          return yield* Effect.fail(new Conflict({ message: `Notice ${noticeId} version ${input.version} (${input.language}) already exists` }))
        }
        yield* events.emit(developerId, "dpdp.consent_notice.registered", { id, noticeId, version: input.version, language: input.language })
        yield* audit.append({
          developerId,
          action: "service.dpdp.notice_registered",
          metadata: { id, noticeId, version: input.version, language: input.language, noticeDigest: row.noticeDigest, missing }
        })
        return row
      })).pipe(Effect.catchTag("SqlError", Effect.die))
      return noticeView(row)
    })

  const list = (developerId: string, page: { limit: number; cursor: CursorPosition | undefined }) =>
    Effect.gen(function*() {
      const params: Array<unknown> = [developerId]
      let after = ""
      if (page.cursor !== undefined) {
        params.push(new Date(page.cursor.createdAt), page.cursor.id)
        after = "WHERE (created_at, id) < ($2, $3)"
      }
      params.push(page.limit + 1)
      const rows = yield* sql.unsafe<NoticeRow>(
        `WITH newest AS (SELECT DISTINCT ON (notice_id) ${COLUMNS} FROM dpdp_consent_notices WHERE developer_id = $1
                         ORDER BY notice_id, created_at DESC, id DESC)
         SELECT * FROM newest ${after} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`,
        params as any
      ).pipe(Effect.orDie)
      const { page: shown, nextCursor } = toPage(rows, page.limit)
      return { notices: shown.map((n) => noticeView(n)), nextCursor }
    })

  const versions = (developerId: string, noticeId: string) =>
    Effect.gen(function*() {
      const rows = yield* sql.unsafe<NoticeRow>(
        `SELECT ${COLUMNS} FROM dpdp_consent_notices WHERE developer_id = $1 AND notice_id = $2 ORDER BY created_at DESC, id DESC LIMIT 500`,
        [developerId, noticeId]
      ).pipe(Effect.orDie)
      if (rows.length === 0) return yield* Effect.fail(new NotFound({ message: "Notice not found" }))
      return { noticeId, versions: rows.map((n) => noticeView(n)) }
    })

  const version = (developerId: string, noticeId: string, version: string, language: string | undefined) =>
    Effect.gen(function*() {
      const rows = yield* sql.unsafe<NoticeRow>(
        `SELECT ${COLUMNS} FROM dpdp_consent_notices WHERE developer_id = $1 AND notice_id = $2 AND version = $3
           AND ($4::text IS NULL OR language = $4) ORDER BY (language = 'en') DESC, created_at LIMIT 1`,
        [developerId, noticeId, version, language ?? null]
      ).pipe(Effect.orDie)
      if (rows[0] === undefined) return yield* Effect.fail(new NotFound({ message: "Notice version not found" }))
      return noticeView(rows[0], { content: true })
    })

  const retire = (developerId: string, noticeId: string, version: string) =>
    sql.withTransaction(Effect.gen(function*() {
      const ms = yield* nowMillis
      const before = yield* sql<{ language: string; retiredAt: Date | null }>`
        SELECT language, retired_at FROM dpdp_consent_notices
        WHERE developer_id = ${developerId} AND notice_id = ${noticeId} AND version = ${version} ORDER BY language FOR UPDATE`
      if (before.length === 0) return yield* Effect.fail(new NotFound({ message: "Notice version not found" }))
      const newly = yield* sql`UPDATE dpdp_consent_notices SET retired_at = ${new Date(ms)}
        WHERE developer_id = ${developerId} AND notice_id = ${noticeId} AND version = ${version} AND retired_at IS NULL RETURNING id`
      const languages = before.map((r) => r.language)
      const retiredAt = Math.min(...before.map((r) => r.retiredAt?.getTime() ?? ms))
      if (newly.length > 0) {
        const data = { noticeId, version, languages, retiredAt: new Date(retiredAt).toISOString() }
        yield* events.emit(developerId, "dpdp.consent_notice.retired", data)
        yield* audit.append({ developerId, action: "service.dpdp.notice_retired", metadata: data })
      }
      return { noticeId, version, languages, retiredAt: new Date(retiredAt).toISOString() }
    })).pipe(Effect.catchTag("SqlError", Effect.die))

  /**
   * The version a new record binds to: the one whose contentHash is given (@grantex/dpdp), the given
   * version, or the newest unretired one in the language. `noticeId` may also be the `notice_` id.
   */
  const choose = (developerId: string, choice: NoticeChoice) =>
    Effect.gen(function*() {
      const rows = yield* sql.unsafe<NoticeRow>(
        `SELECT ${COLUMNS} FROM dpdp_consent_notices WHERE developer_id = $1
           AND notice_id = (SELECT notice_id FROM dpdp_consent_notices WHERE developer_id = $1 AND (notice_id = $2 OR id = $2) LIMIT 1)
         ORDER BY created_at DESC, id DESC LIMIT 1000`,
        [developerId, choice.noticeId]
      ).pipe(Effect.orDie)
      if (rows.length === 0) return yield* Effect.fail(new InvalidNotice({ message: "No notice with that consentNoticeId" }))
      let candidates: ReadonlyArray<NoticeRow>
      if (choice.contentHash !== undefined) {
        candidates = rows.filter((n) => n.contentHash === choice.contentHash!.toLowerCase())
        if (candidates.length === 0) {
          return yield* Effect.fail(new NoticeHashMismatch({ message: "No version of the notice has that consentNoticeHash" }))
        }
        const inLanguage = candidates.filter((n) => n.language === choice.language)
        if (inLanguage.length > 0) candidates = inLanguage
      } else {
        candidates = rows.filter((n) => n.language === choice.language && (choice.version === undefined || n.version === choice.version))
        if (candidates.length === 0) {
          return yield* Effect.fail(new InvalidNotice({ message: `The notice has no ${choice.version !== undefined ? `version ${choice.version} ` : "version "}in language ${choice.language}` }))
        }
      }
      const open = candidates.find((n) => n.retiredAt === null)
      if (open === undefined) return yield* Effect.fail(new NoticeRetired({ message: "That notice version is retired" }))
      return open
    })

  return { register, list, versions, version, retire, choose }
})

export type NoticesService = Effect.Effect.Success<typeof makeNotices>
