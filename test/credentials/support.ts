/**
 * Independent verifiers of what the service issues, as a relying party would run them: the DID
 * document resolved by did-resolver + web-did-resolver (its fetch shimmed to the loopback app,
 * since did:web always means https), keys taken from the document alone, status lists decoded by
 * @digitalbazaar/vc-bitstring-status-list, SD-JWT VCs checked by @sd-jwt/sd-jwt-vc.
 */
import { mock } from "bun:test"
import { createPublicKey, generateKeyPairSync, sign as cryptoSign, verify as cryptoVerify, type KeyObject } from "node:crypto"
import * as jose from "jose"
import type { TestApp } from "../support/app.ts"

/** where did:web and status-list URLs (https://host/..., http://localhost:0/...) really go: the app under test */
let target: string | undefined
export const routeTo = (app: TestApp) => {
  target = app.url
}
const toLoopback = (input: string | URL | Request) => {
  const url = new URL(typeof input === "string" ? input : input instanceof URL ? input.href : input.url)
  return `${target}${url.pathname}${url.search}`
}
const shim = (input: any, init?: any) => fetch(toLoopback(input), init)
// web-did-resolver fetches through cross-fetch
mock.module("cross-fetch", () => ({ default: shim, fetch: shim }))

const { Resolver } = await import("did-resolver")
const { getResolver } = await import("web-did-resolver")
// @ts-ignore the package ships no types
export const { decodeList } = await import("@digitalbazaar/vc-bitstring-status-list")
const { SDJwtVcInstance } = await import("@sd-jwt/sd-jwt-vc")
const { digest } = await import("@sd-jwt/crypto-nodejs")

// web-did-resolver bundles its own (older) did-resolver types
const resolver = new Resolver(getResolver() as any)

const BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
const base58 = (text: string) => {
  let n = 0n
  for (const ch of text) n = n * 58n + BigInt(BASE58.indexOf(ch))
  const out: Array<number> = []
  while (n > 0n) {
    out.unshift(Number(n % 256n))
    n /= 256n
  }
  return Uint8Array.from(out)
}

/** the assertion key a JWS header names, from the issuer's DID document alone */
export const resolveAssertionKey = async (kid: string): Promise<KeyObject> => {
  const did = kid.split("#")[0]!
  const { didDocument, didResolutionMetadata } = await resolver.resolve(did)
  if (didDocument === null) throw new Error(`did not resolve: ${JSON.stringify(didResolutionMetadata)}`)
  if (!(didDocument.assertionMethod ?? []).includes(kid)) throw new Error(`${kid} is not an assertion method`)
  const method = didDocument.verificationMethod!.find((m) => m.id === kid)!
  if (method.type !== "Multikey" || !method.publicKeyMultibase?.startsWith("z")) throw new Error("not a Multikey")
  const bytes = base58(method.publicKeyMultibase.slice(1))
  if (bytes[0] !== 0xed || bytes[1] !== 0x01) throw new Error("not an Ed25519 key")
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(bytes.subarray(2)).toString("base64url") }, format: "jwk" })
}

export const resolveDid = (did: string) => resolver.resolve(did)

/** jose, with the key resolved from the DID document */
export const joseVerify = async (jwt: string, typ = "vc+jwt") =>
  jose.jwtVerify(jwt, async (header) => resolveAssertionKey(header.kid!), { typ, algorithms: ["EdDSA"] })

/** the W3C status of a credential entry: fetch the list credential, check it with jose, decode with Digital Bazaar */
export const bitstringStatus = async (entry: { statusListCredential: string; statusListIndex: string; statusPurpose: string }) => {
  const res = await fetch(toLoopback(entry.statusListCredential))
  if (res.status !== 200) throw new Error(`status list ${res.status}`)
  const { payload } = await joseVerify(await res.text())
  const subject = (payload as any).credentialSubject
  if (subject.statusPurpose !== entry.statusPurpose) throw new Error("purpose mismatch")
  const list = await decodeList({ encodedList: subject.encodedList })
  return list.getStatus(Number(entry.statusListIndex)) as boolean
}

export const holderKeys = () => {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519")
  const jwk = publicKey.export({ format: "jwk" }) as { kty: string; crv: string; x: string }
  return { privateKey, publicKey, jwk }
}

/** @sd-jwt/sd-jwt-vc with the issuer key from the DID document and the holder key from cnf */
export const sdJwtVc = (holder?: { privateKey: KeyObject }) =>
  new SDJwtVcInstance({
    hasher: digest,
    verifier: async (data: string, signature: string) => {
      const header = JSON.parse(Buffer.from(data.split(".")[0]!, "base64url").toString())
      const key = await resolveAssertionKey(header.kid)
      return cryptoVerify(null, Buffer.from(data), key, Buffer.from(signature, "base64url"))
    },
    kbVerifier: async (data: string, signature: string, payload: any) => {
      const key = createPublicKey({ key: payload.cnf.jwk, format: "jwk" })
      return cryptoVerify(null, Buffer.from(data), key, Buffer.from(signature, "base64url"))
    },
    ...(holder
      ? { kbSigner: (data: string) => cryptoSign(null, Buffer.from(data), holder.privateKey).toString("base64url"), kbSignAlg: "EdDSA" }
      : {}),
    statusListFetcher: async (uri: string) => {
      const res = await fetch(toLoopback(uri), { headers: { accept: "application/statuslist+jwt" } })
      if (!res.headers.get("content-type")?.includes("application/statuslist+jwt")) throw new Error("not a status list token")
      return res.text()
    }
  } as any)

/** a sandbox developer's agent and a fresh authorization code for it */
export const sandbox = async (app: TestApp, scopes = ["email:read", "calendar:read"]) => {
  const dev = await app.signup({ mode: "sandbox" })
  const agent = await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "vc agent", scopes } })
  const code = async () =>
    (await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId: agent.body.agentId, principalId: "user_42", scopes } })).body.code as string
  const token = async (extra: Record<string, unknown> = {}) =>
    app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code: await code(), agentId: agent.body.agentId, ...extra } })
  return { ...dev, agentId: agent.body.agentId as string, code, token }
}

export const payloadOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString()) as any
export const headerOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split(".")[0]!, "base64url").toString()) as any
