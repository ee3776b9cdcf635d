/**
 * The auditor's verifier (decisions §15): checks an export with nothing but the file and the
 * service's public JWKS.
 *
 *   bun scripts/verify-export.ts <export file> <jwks.json file or https://…/.well-known/jwks.json>
 *
 * NDJSON and CSV exports (streamed or from a job): the trailer's SHA-256 over every byte before it,
 * its JWS (RS256, key by `kid`) over the header and trailer facts, the row count, every audit
 * entry's hash (the chain's own function, imported, not copied), the links from the anchor, and the
 * last hash. Evidence packs: every manifest digest over its section's canonical JSON, the JWS over
 * the manifest, and the audit entries and their chain from `chainIntegrity.anchorHash`. JSON pages:
 * the digest of the page, its JWS, and the entries as above. Exit 0 when everything holds, else 1.
 */
import { parse } from "csv-parse/sync"
import * as jose from "jose"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import { AUDIT_COLUMNS, GRANT_COLUMNS, NULLABLE, signedTrailer, type ExportHeader } from "../src/compliance/Format.ts"
import { canonicalJson, entryHash } from "../src/platform/AuditChain.ts"

export interface Verdict {
  readonly ok: boolean
  readonly kind: string
  readonly rows: number
  readonly errors: ReadonlyArray<string>
}

type Jwks = { keys: Array<Record<string, unknown>> }

const sha256 = (data: Uint8Array | string) => createHash("sha256").update(data).digest("hex")

/** verifies a compact JWS against the JWKS; returns its payload text */
const verifyJws = async (jws: string, jwks: Jwks): Promise<string> => {
  const keySet = jose.createLocalJWKSet(jwks as jose.JSONWebKeySet)
  const { payload, protectedHeader } = await jose.compactVerify(jws, keySet, { algorithms: ["RS256"] })
  if (protectedHeader.kid === undefined) throw new Error("the signature names no kid")
  return new TextDecoder().decode(payload)
}

/** every entry's hash; with `anchor` defined, the links and consecutive seqs from it */
const checkEntries = (entries: ReadonlyArray<any>, anchor: string | null | undefined, errors: Array<string>) => {
  let prev = anchor
  let lastSeq: number | undefined
  for (const [i, e] of entries.entries()) {
    const { seq, entryId, hash, ...fields } = e
    const expected = entryHash({ id: entryId, agentId: fields.agentId, agentDid: fields.agentDid, grantId: fields.grantId,
      principalId: fields.principalId, developerId: fields.developerId, action: fields.action, metadata: fields.metadata,
      timestamp: fields.timestamp, prevHash: fields.prevHash, status: fields.status })
    if (expected !== hash) errors.push(`entry ${i + 1} (${entryId}): hash does not match its content`)
    if (lastSeq !== undefined && !(seq > lastSeq)) errors.push(`entry ${i + 1} (${entryId}): out of chain order`)
    if (anchor !== undefined) {
      if (fields.prevHash !== prev) errors.push(`entry ${i + 1} (${entryId}): does not link to the entry before it`)
      if (lastSeq !== undefined && seq !== lastSeq + 1) errors.push(`entry ${i + 1} (${entryId}): an entry is missing before it`)
    }
    prev = hash
    lastSeq = seq
    if (errors.length > 20) return prev
  }
  return prev
}

const fromCsv = (body: string, kind: "audit" | "grants"): Array<any> => {
  const records: Array<Array<string | null>> = parse(body, {
    comment: "#",
    comment_no_infix: true,
    relax_column_count: false,
    cast: (value, context) => (!context.quoting && value === "" ? null : value)
  })
  const columns = kind === "audit" ? AUDIT_COLUMNS : GRANT_COLUMNS
  const [names, ...rows] = records
  if (names === undefined || names.join(",") !== columns.join(",")) throw new Error("unexpected CSV columns")
  return rows.map((r) => {
    const o: Record<string, unknown> = {}
    columns.forEach((c, i) => {
      const v = r[i] ?? null
      if (c === "seq" || c === "delegationDepth") o[c] = Number(v)
      else if (c === "metadata" || c === "scopes") o[c] = JSON.parse(v ?? "null")
      else o[c] = v === null && !NULLABLE.has(c) ? "" : v
    })
    return o
  })
}

const verifyStream = async (bytes: Uint8Array, jwks: Jwks): Promise<Verdict> => {
  const errors: Array<string> = []
  const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  const csv = text.startsWith("# export ")
  if (!text.endsWith("\n")) return { ok: false, kind: "stream", rows: 0, errors: ["the file does not end with its trailer line"] }
  const cut = text.lastIndexOf("\n", text.length - 2) + 1
  const trailerLine = text.slice(cut, -1)
  const headLine = text.slice(0, text.indexOf("\n"))
  const header: ExportHeader = csv ? JSON.parse(headLine.slice("# export ".length)) : JSON.parse(headLine).export
  const trailer = csv
    ? (trailerLine.startsWith("# end ") ? JSON.parse(trailerLine.slice("# end ".length)) : undefined)
    : JSON.parse(trailerLine).exportEnd
  if (header === undefined || trailer === undefined) return { ok: false, kind: "stream", rows: 0, errors: ["no export header or trailer"] }
  const kind = `${header.kind} ${header.format}`
  const covered = Buffer.from(text.slice(0, cut), "utf8")
  if (sha256(covered) !== trailer.sha256) errors.push("sha256 of the file does not match its trailer (bytes changed, added or removed)")
  try {
    const payload = await verifyJws(trailer.signature, jwks)
    if (payload !== signedTrailer(header, trailer.rows, trailer.sha256, header.kind === "audit" ? trailer.lastHash : undefined)) {
      errors.push("the signature does not cover this header and trailer")
    }
  } catch (e) {
    errors.push(`signature: ${e instanceof Error ? e.message : String(e)}`)
  }
  const body = text.slice(text.indexOf("\n") + 1, cut)
  const rows = csv ? fromCsv(body, header.kind) : body.split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
  if (rows.length !== trailer.rows) errors.push(`${rows.length} rows, the trailer says ${trailer.rows}`)
  if (header.kind === "audit") {
    const last = checkEntries(rows, header.contiguous ? header.anchor ?? null : undefined, errors)
    const expectedLast = rows.length === 0 ? (header.contiguous ? header.anchor ?? null : null) : last
    if ((trailer.lastHash ?? null) !== (expectedLast ?? null)) errors.push("the last entry's hash does not match the trailer")
  }
  return { ok: errors.length === 0, kind, rows: rows.length, errors }
}

const REQUIRED_SECTIONS = ["meta", "summary", "policies", "breaches", "grants", "auditEntries", "chainIntegrity"]

const verifyPack = async (pack: any, jwks: Jwks): Promise<Verdict> => {
  const errors: Array<string> = []
  const files: Array<{ name: string; sha256: string; rows: number }> = pack.manifest?.files ?? []
  for (const name of REQUIRED_SECTIONS) if (!files.some((f) => f.name === name)) errors.push(`the manifest does not list ${name}`)
  for (const f of files) {
    if (!(f.name in pack)) { errors.push(`section ${f.name} is missing`); continue }
    if (sha256(canonicalJson(pack[f.name])) !== f.sha256) errors.push(`section ${f.name}: digest does not match the manifest`)
    if (Array.isArray(pack[f.name]) && pack[f.name].length !== f.rows) errors.push(`section ${f.name}: ${pack[f.name].length} rows, manifest says ${f.rows}`)
  }
  try {
    if ((await verifyJws(pack.signature, jwks)) !== canonicalJson(pack.manifest)) errors.push("the signature does not cover this manifest")
  } catch (e) {
    errors.push(`signature: ${e instanceof Error ? e.message : String(e)}`)
  }
  const entries = Array.isArray(pack.auditEntries) ? pack.auditEntries : []
  checkEntries(entries, pack.chainIntegrity?.anchorHash ?? null, errors)
  if (pack.chainIntegrity?.valid !== true) errors.push("the service reported the chain broken")
  return { ok: errors.length === 0, kind: "evidence-pack", rows: entries.length, errors }
}

const verifyPage = async (page: any, jwks: Jwks): Promise<Verdict> => {
  const errors: Array<string> = []
  const { signature, ...unsigned } = page
  const digest = sha256(canonicalJson(unsigned))
  try {
    const payload = JSON.parse(await verifyJws(signature, jwks))
    if (payload.sha256 !== digest) errors.push("the page's digest does not match its signature (content changed)")
  } catch (e) {
    errors.push(`signature: ${e instanceof Error ? e.message : String(e)}`)
  }
  const rows = page.entries ?? page.grants ?? []
  if (page.entries !== undefined) checkEntries(page.entries, page.contiguous ? page.anchor ?? null : undefined, errors)
  return { ok: errors.length === 0, kind: page.entries !== undefined ? "audit json page" : "grants json page", rows: rows.length, errors }
}

export const verifyExport = async (bytes: Uint8Array, jwks: Jwks): Promise<Verdict> => {
  try {
    const start = new TextDecoder().decode(bytes.subarray(0, 16))
    if (start.startsWith("# export ") || start.startsWith('{"export":')) return await verifyStream(bytes, jwks)
    const doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
    if (doc?.manifest !== undefined) return await verifyPack(doc, jwks)
    if (typeof doc?.signature === "string") return await verifyPage(doc, jwks)
    return { ok: false, kind: "unknown", rows: 0, errors: ["not an export this verifier knows"] }
  } catch (e) {
    return { ok: false, kind: "unknown", rows: 0, errors: [`unreadable: ${e instanceof Error ? e.message : String(e)}`] }
  }
}

if (import.meta.main) {
  const [file, keys] = process.argv.slice(2)
  if (file === undefined || keys === undefined) {
    console.error("usage: bun scripts/verify-export.ts <export file> <jwks.json | https://host/.well-known/jwks.json>")
    process.exit(2)
  }
  const jwks = /^https?:\/\//.test(keys) ? await (await fetch(keys)).json() : JSON.parse(readFileSync(keys, "utf8"))
  const verdict = await verifyExport(readFileSync(file), jwks as Jwks)
  console.log(`${verdict.ok ? "VALID" : "INVALID"}: ${verdict.kind}, ${verdict.rows} rows`)
  for (const e of verdict.errors) console.log(`  - ${e}`)
  process.exit(verdict.ok ? 0 : 1)
}
