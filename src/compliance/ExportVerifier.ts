/**
 * The auditor's verifier (decisions §15, revised): checks an export with nothing but the export,
 * its proof and the service's public JWKS.
 *
 *   agent-auth verify-export <export file> <jwks.json | https://…/.well-known/jwks.json> [proof.json] [--headers <file>]
 *   (the same as `npx agent-auth-verify-export …` from its package, or `bun scripts/verify-export.ts …` in a checkout)
 *
 * NDJSON and CSV bodies hold only rows; their proof is the JSON of GET /v1/compliance/exports/:exportId
 * (`proof.json`), or a job download's `Export-Proof` header (`--headers`: the response headers as
 * `curl -D` writes them), or, in the envelope form (`?envelope=true`), the file's own last line.
 * Checked: the body's SHA-256 against the proof, the proof's detached JWS (RS256, key by `kid`), the
 * row count, every audit entry's hash (the chain's own function, imported, not copied; CSV cells
 * read back from their formula guard), the links from the anchor, and the last hash; headers given
 * must agree with the proof (`Export-Id`, `Export-Anchor`, `Content-Digest`). Evidence packs: every
 * manifest digest over its section's canonical JSON, the JWS over the manifest, the audit entries
 * and their chain from `chainIntegrity.anchorHash`, the Cedar set's text against its digest. JSON
 * pages: the digest of the page, its JWS, and the entries as above. Exit 0 when everything holds, else 1.
 */
import { parse } from "csv-parse/sync"
import * as jose from "jose"
import { createHash } from "node:crypto"
import { readFileSync } from "node:fs"
import {
  attach, AUDIT_COLUMNS, type ExportProof, GRANT_COLUMNS, isContiguous, NULLABLE, PROOF_FIELDS, proofPayload, startOf, unneutralise
} from "./Format.ts"
import { canonicalJson, checkEntry } from "../platform/AuditHash.ts"

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
    // both hash versions (decisions §21): version 2's digests against its salt while it exists; an erased version-1 entry by its links
    const own = checkEntry({ id: entryId, agentId: fields.agentId, agentDid: fields.agentDid, grantId: fields.grantId,
      principalId: fields.principalId, developerId: fields.developerId, action: fields.action, metadata: fields.metadata,
      timestamp: fields.timestamp, prevHash: fields.prevHash, status: fields.status, hash, hashVersion: fields.hashVersion,
      piiSalt: fields.piiSalt, principalDigest: fields.principalDigest, metadataDigest: fields.metadataDigest, erased: fields.erased })
    if (!own.ok) errors.push(`entry ${i + 1} (${entryId}): hash does not match its content`)
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

/** RFC 4180 as csv-parse reads it strictly (no comments, no relaxed quotes or column counts) */
const fromCsv = (body: string, kind: "audit" | "grants"): Array<any> => {
  const records: Array<Array<string | null>> = parse(body, {
    relax_column_count: false,
    relax_quotes: false,
    cast: (value, context) => (!context.quoting && value === "" ? null : unneutralise(value))
  })
  const columns = kind === "audit" ? AUDIT_COLUMNS : GRANT_COLUMNS
  const [names, ...rows] = records
  if (names === undefined || names.join(",") !== columns.join(",")) throw new Error("unexpected CSV columns")
  return rows.map((r) => {
    const o: Record<string, unknown> = {}
    columns.forEach((c, i) => {
      const v = r[i] ?? null
      if (c === "seq" || c === "delegationDepth" || c === "hashVersion") o[c] = Number(v)
      else if (c === "erased") o[c] = v === "true"
      else if (c === "metadata" || c === "scopes") o[c] = JSON.parse(v ?? "null")
      else o[c] = v === null && !NULLABLE.has(c) ? "" : v
    })
    return o
  })
}

/** NDJSON: every line one JSON value, the body ending with a newline */
const fromNdjson = (text: string, errors: Array<string>): Array<any> => {
  if (text === "") return []
  if (!text.endsWith("\n")) errors.push("the NDJSON body does not end with a newline")
  return text.replace(/\n$/, "").split("\n").map((l) => JSON.parse(l))
}

type HeaderBag = Headers | Record<string, string>
const headerOf = (headers: HeaderBag | undefined, name: string): string | undefined => {
  if (headers === undefined) return undefined
  if (headers instanceof Headers) return headers.get(name) ?? undefined
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name)
  return key === undefined ? undefined : headers[key]
}

/** a job download carries its whole proof in `Export-Proof` (base64url JSON) */
const proofFromHeaders = (headers: HeaderBag | undefined): unknown => {
  const raw = headerOf(headers, "export-proof")
  return raw === undefined ? undefined : JSON.parse(Buffer.from(raw, "base64url").toString("utf8"))
}

const asProof = (value: unknown): ExportProof => {
  const v = value as Record<string, unknown>
  if (v === null || typeof v !== "object" || typeof v.signature !== "string" || PROOF_FIELDS.some((f) => !(f in v))) {
    throw new Error("not an export proof (GET /v1/compliance/exports/:exportId once the export is complete)")
  }
  return { ...(Object.fromEntries(PROOF_FIELDS.map((f) => [f, v[f]])) as any), signature: v.signature }
}

/** the body of an NDJSON or CSV export against its proof; returns the rows read */
const verifyBody = async (body: Uint8Array, proof: ExportProof, jwks: Jwks, errors: Array<string>) => {
  if (proof.status !== "complete") errors.push(`the proof says ${proof.status}, not complete`)
  if (sha256(body) !== proof.sha256) errors.push("sha256 of the body does not match its proof (bytes changed, added or removed)")
  try {
    const expected = proofPayload(proof)
    const detached = proof.signature.split(".")[1] === ""
    if ((await verifyJws(detached ? attach(proof.signature, expected) : proof.signature, jwks)) !== expected) {
      errors.push("the signature does not cover this proof")
    }
  } catch (e) {
    errors.push(`signature: ${e instanceof Error ? e.message : String(e)}`)
  }
  const text = new TextDecoder("utf-8", { fatal: true }).decode(body)
  const rows = proof.format === "csv" ? fromCsv(text, proof.kind) : fromNdjson(text, errors)
  if (rows.length !== proof.rows) errors.push(`${rows.length} rows, the proof says ${proof.rows}`)
  if (proof.kind === "audit") {
    const contiguous = isContiguous(proof)
    const last = checkEntries(rows, contiguous ? proof.anchor ?? null : undefined, errors)
    const expectedLast = rows.length === 0 ? (contiguous ? proof.anchor ?? null : null) : last
    if ((proof.lastHash ?? null) !== (expectedLast ?? null)) errors.push("the last entry's hash does not match the proof")
  }
  return rows.length
}

/** headers that came with the body must say what the proof says */
const checkHeaders = (headers: HeaderBag | undefined, body: Uint8Array, proof: ExportProof, errors: Array<string>) => {
  const id = headerOf(headers, "export-id")
  if (id !== undefined && id !== proof.exportId) errors.push(`Export-Id ${id} is not the proof's export (${proof.exportId})`)
  const anchor = headerOf(headers, "export-anchor")
  if (anchor !== undefined && anchor !== (proof.anchor ?? "")) errors.push("Export-Anchor does not match the proof's anchor")
  const digest = headerOf(headers, "content-digest")
  const m = digest === undefined ? null : /sha-256=:([A-Za-z0-9+/=]+):/.exec(digest)
  if (digest !== undefined && (m === null || Buffer.from(m[1]!, "base64").toString("hex") !== sha256(body))) {
    errors.push("Content-Digest does not match the body")
  }
}

const verifyDetached = async (bytes: Uint8Array, proofJson: unknown, jwks: Jwks, headers?: HeaderBag): Promise<Verdict> => {
  const errors: Array<string> = []
  const proof = asProof(proofJson)
  checkHeaders(headers, bytes, proof, errors)
  const rows = await verifyBody(bytes, proof, jwks, errors)
  return { ok: errors.length === 0, kind: `${proof.kind} ${proof.format}`, rows, errors }
}

/** the one-file form: a first line with the start, the body, a last line with the proof */
const verifyEnvelope = async (bytes: Uint8Array, jwks: Jwks): Promise<Verdict> => {
  const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes)
  const csv = text.startsWith("# export ")
  const firstEnd = text.indexOf("\n") + 1
  const cut = text.lastIndexOf("\n", text.length - 2) + 1
  if (!text.endsWith("\n") || cut < firstEnd) return { ok: false, kind: "envelope", rows: 0, errors: ["the file does not end with its proof line"] }
  const headLine = text.slice(0, firstEnd - 1)
  const endLine = text.slice(cut, -1)
  const start = csv ? JSON.parse(headLine.slice("# export ".length)) : JSON.parse(headLine).export
  const end = csv ? (endLine.startsWith("# end ") ? JSON.parse(endLine.slice("# end ".length)) : undefined) : JSON.parse(endLine).exportEnd
  if (start === undefined || end === undefined) return { ok: false, kind: "envelope", rows: 0, errors: ["no export line or proof line"] }
  const errors: Array<string> = []
  const proof = asProof(end)
  if (canonicalJson(start) !== canonicalJson(startOf(proof))) errors.push("the first line does not say what the signed proof says")
  const rows = await verifyBody(Buffer.from(text.slice(firstEnd, cut), "utf8"), proof, jwks, errors)
  return { ok: errors.length === 0, kind: `${proof.kind} ${proof.format} envelope`, rows, errors }
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
  // policies: the rules and the active Cedar set, whose text must be what its digest says
  const policies = pack.policies
  if (policies !== undefined && !Array.isArray(policies)) {
    const listed = files.find((f) => f.name === "policies")?.rows
    const rules = Array.isArray(policies.rules) ? policies.rules.length : 0
    if (listed !== undefined && listed !== rules + (policies.cedar ? 1 : 0)) errors.push(`section policies: manifest says ${listed} rows`)
    if (policies.cedar && sha256(String(policies.cedar.text)) !== policies.cedar.sha256) {
      errors.push("section policies: the Cedar set's text does not match its digest")
    }
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

export interface VerifyOptions {
  /** the proof of an NDJSON/CSV body: the JSON of GET /v1/compliance/exports/:exportId */
  readonly proof?: unknown
  /** the response headers the body came with (a job download's carry its whole proof) */
  readonly headers?: HeaderBag
}

export const verifyExport = async (bytes: Uint8Array, jwks: Jwks, options: VerifyOptions = {}): Promise<Verdict> => {
  try {
    const start = new TextDecoder().decode(bytes.subarray(0, 16))
    if (start.startsWith("# export ") || start.startsWith('{"export":')) return await verifyEnvelope(bytes, jwks)
    const proof = options.proof ?? proofFromHeaders(options.headers)
    if (proof !== undefined) return await verifyDetached(bytes, proof, jwks, options.headers)
    let doc: any
    try {
      doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
    } catch {
      doc = undefined
    }
    if (doc?.manifest !== undefined) return await verifyPack(doc, jwks)
    if (typeof doc?.signature === "string") return await verifyPage(doc, jwks)
    return {
      ok: false, kind: "unknown", rows: 0,
      errors: ["no proof: an NDJSON or CSV export is verified with GET /v1/compliance/exports/:exportId (or its download's headers)"]
    }
  } catch (e) {
    return { ok: false, kind: "unknown", rows: 0, errors: [`unreadable: ${e instanceof Error ? e.message : String(e)}`] }
  }
}
