/** Shared set-up of the DPDP tests: a notice, a grant, a record; and a real Ed25519 check of a proof. */
import { createPublicKey, verify } from "node:crypto"
import { createAgent, issueGrant } from "../support/fixtures.ts"
import type { TestApp } from "../support/app.ts"

export const NOTICE = {
  noticeId: "privacy",
  version: "1",
  title: "How we use your data",
  content: "We read your calendar to schedule meetings.",
  purposes: [{ code: "calendar-sync", description: "Schedule meetings" }, { code: "reminders", description: "Remind you" }]
}

export const developer = async (app: TestApp) => {
  const { apiKey, developerId } = await app.signup()
  const notice = await app.request("POST", "/v1/dpdp/consent-notices", { apiKey, body: NOTICE })
  if (notice.status !== 201) throw new Error(`notice: ${notice.status} ${notice.text}`)
  const agentId = await createAgent(app, developerId)
  const grant = async (principalId = "user_1") =>
    (await issueGrant(app, { developerId, agentId, principalId, scopes: ["calendar:read"], expiresInSeconds: 30 * 86400 })).grant
  return { apiKey, developerId, agentId, notice: notice.body, grant }
}

export const recordBody = (grantId: string, over: Record<string, unknown> = {}) => ({
  grantId,
  dataPrincipalId: "user_1",
  purposes: [{ code: "calendar-sync", description: "Schedule meetings" }],
  consentNoticeId: "privacy",
  processingExpiresAt: "2027-11-22T10:00:00Z",
  ...over
})

const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
const base58Decode = (text: string): Buffer => {
  let n = 0n
  for (const c of text) n = n * 58n + BigInt(BASE58.indexOf(c))
  const hex = n.toString(16)
  return Buffer.from(hex.length % 2 ? "0" + hex : hex, "hex")
}

/** Verifies a compact JWS with the Ed25519 key the DID document publishes under its kid; answers the payload. */
export const verifyWithDidDocument = async (app: TestApp, jws: string) => {
  const [h, p, s] = jws.split(".")
  const header = JSON.parse(Buffer.from(h!, "base64url").toString("utf8"))
  const did = (await app.request("GET", "/.well-known/did.json")).body
  const method = did.verificationMethod.find((m: any) => m.id === header.kid && m.type === "Multikey")
  if (method === undefined) throw new Error(`no Multikey ${header.kid} in did.json`)
  const raw = base58Decode(method.publicKeyMultibase.slice(1)).subarray(2) // after the ed25519-pub prefix 0xed01
  const key = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: raw.toString("base64url") }, format: "jwk" })
  const ok = verify(null, Buffer.from(`${h}.${p}`), key, Buffer.from(s!, "base64url"))
  return { ok, header, payload: JSON.parse(Buffer.from(p!, "base64url").toString("utf8")), did: did.id as string }
}
