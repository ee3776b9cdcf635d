import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Clock, Effect } from "effect"
import { generateKeyPairSync } from "node:crypto"
import { ConfigError, loadConfig } from "../../src/Config.ts"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(async () => {
  await app.stop()
})

describe("health, jwks and docs", () => {
  test("GET /health answers ok with both dependencies up", async () => {
    const res = await app.request("GET", "/health")
    expect(res.status).toBe(200)
    expect(res.body).toEqual({ status: "ok" })
    expect(res.headers.get("x-ratelimit-limit")).toBeNull()
  })

  test("JWKS publishes the RS256 key with an RFC 7638 kid", async () => {
    const res = await app.request("GET", "/.well-known/jwks.json")
    expect(res.status).toBe(200)
    expect(res.body.keys).toHaveLength(1)
    const key = res.body.keys[0]
    expect(key).toMatchObject({ kty: "RSA", alg: "RS256", use: "sig" })
    const { calculateJwkThumbprint } = await import("jose")
    expect(key.kid).toBe(await calculateJwkThumbprint({ kty: key.kty, n: key.n, e: key.e }))
  })

  test("OpenAPI 3.1 document and the docs page", async () => {
    const spec = await app.request("GET", "/openapi.json")
    expect(spec.status).toBe(200)
    expect(spec.body.openapi).toBe("3.1.0")
    expect(Object.keys(spec.body.paths)).toContain("/v1/signup")
    // the vault exchange reads its body by hand (for the 401 → 400 order) yet documents it
    const exchange = spec.body.paths["/v1/vault/credentials/exchange"].post
    expect(exchange.requestBody.content["application/json"].schema).toMatchObject({ required: ["service"], properties: { service: { type: "string" } } })
    const docs = await app.request("GET", "/docs")
    expect(docs.status).toBe(200)
    expect(docs.headers.get("content-type")).toContain("text/html")
  })

  test("metrics in Prometheus text format", async () => {
    const res = await app.request("GET", "/metrics")
    expect(res.status).toBe(200)
    expect(res.text).toContain("http_requests_total{")
    expect(res.text).toContain("http_request_duration_seconds_bucket{")
    expect(res.text).toContain("process_resident_memory_bytes")
  })
})

describe("errors", () => {
  test("unknown route → 404 NOT_FOUND with the request id", async () => {
    const res = await app.request("GET", "/v1/nothing-here", { headers: { "x-request-id": "trace-123" } })
    expect(res.status).toBe(404)
    expect(res.body).toEqual({ code: "NOT_FOUND", message: "No such route", requestId: "trace-123" })
    expect(res.headers.get("x-request-id")).toBe("trace-123")
  })

  test("malformed JSON → 400 BAD_REQUEST in the error shape", async () => {
    const res = await app.request("POST", "/v1/signup", { rawBody: "{not json" })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    expect(res.body.requestId).toBe(res.headers.get("x-request-id"))
  })

  test("schema failure → 400 with details", async () => {
    const res = await app.request("POST", "/v1/signup", { body: { name: "" } })
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
    expect(res.body.details[0].path).toBe("name")
  })

  test("a malformed X-Request-Id is replaced by a generated one", async () => {
    const res = await app.request("GET", "/v1/nothing", { headers: { "x-request-id": "bad id with spaces" } })
    expect(res.body.requestId).toMatch(/^req_[0-9A-Z]{26}$/)
  })
})

describe("developers and keys", () => {
  test("signup, me, patch, rotate; the old key stops working", async () => {
    const signup = await app.request("POST", "/v1/signup", { body: { name: "Acme", email: "ops@acme.test" } })
    expect(signup.status).toBe(201)
    expect(signup.body).toMatchObject({ name: "Acme", email: "ops@acme.test", mode: "live", plan: "free" })
    expect(signup.body.apiKey).toMatch(/^sk_live_[A-Za-z0-9_-]{43}$/)
    expect(signup.body.developerId).toMatch(/^dev_[0-9A-Z]{26}$/)
    const stored = await app.query<{ apiKeyHash: string }>("SELECT key_hash AS api_key_hash FROM api_keys WHERE developer_id = $1", [signup.body.developerId])
    expect(stored[0]!.apiKeyHash).toMatch(/^[0-9a-f]{64}$/)
    expect(stored[0]!.apiKeyHash).not.toContain(signup.body.apiKey)

    const me = await app.request("GET", "/v1/me", { apiKey: signup.body.apiKey })
    expect(me.status).toBe(200)
    expect(me.body.developerId).toBe(signup.body.developerId)
    expect(me.body.apiKey).toBeUndefined()

    const patched = await app.request("PATCH", "/v1/me", { apiKey: signup.body.apiKey, body: { fidoRequired: true } })
    expect(patched.status).toBe(200)
    expect(patched.body.fidoRequired).toBe(true)

    const rotated = await app.request("POST", "/v1/keys/rotate", { apiKey: signup.body.apiKey })
    expect(rotated.status).toBe(200)
    expect(rotated.body.apiKey).not.toBe(signup.body.apiKey)
    expect((await app.request("GET", "/v1/me", { apiKey: signup.body.apiKey })).status).toBe(401)
    expect((await app.request("GET", "/v1/me", { apiKey: rotated.body.apiKey })).status).toBe(200)
  })

  test("duplicate email → 409 CONFLICT", async () => {
    await app.request("POST", "/v1/signup", { body: { name: "A", email: "dup@x.test" } })
    const res = await app.request("POST", "/v1/signup", { body: { name: "B", email: "DUP@x.test" } })
    expect(res.status).toBe(409)
    expect(res.body.code).toBe("CONFLICT")
  })

  test("sandbox keys start sk_test_", async () => {
    const res = await app.request("POST", "/v1/signup", { body: { name: "S", mode: "sandbox" } })
    expect(res.body.apiKey).toStartWith("sk_test_")
  })

  test("missing and invalid keys → 401 UNAUTHORIZED", async () => {
    for (const headers of [{}, { authorization: "Bearer sk_live_nope_nope_nope_nope_nope" }, { authorization: "Basic abc" }] as Array<Record<string, string>>) {
      const res = await app.request("GET", "/v1/me", { headers })
      expect(res.status).toBe(401)
      expect(res.body.code).toBe("UNAUTHORIZED")
    }
  })
})

test("TestClock drives the service's clock", async () => {
  const clocked = await startTestApp({ testClock: true, startTime: Date.parse("2030-01-01T00:00:00Z") })
  try {
    expect(await clocked.run(Clock.currentTimeMillis)).toBe(Date.parse("2030-01-01T00:00:00Z"))
    await clocked.adjust("72 hours")
    expect(await clocked.run(Clock.currentTimeMillis)).toBe(Date.parse("2030-01-04T00:00:00Z"))
    const res = await clocked.request("POST", "/v1/signup", { body: { name: "T" } })
    expect(res.body.createdAt).toBe("2030-01-04T00:00:00.000Z")
  } finally {
    await clocked.stop()
  }
})

void Effect

describe("configuration", () => {
  const base = { DATABASE_URL: "pglite://memory", REDIS_URL: "memory://", AUTO_GENERATE_KEYS: "true" }
  const refused = (env: Record<string, string>) => {
    try {
      loadConfig({ ...base, ...env })
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError)
      expect((e as Error).message).not.toContain("\n")
      return (e as ConfigError).variable
    }
    return undefined
  }

  test("a malformed variable that used to pass and fail later stops the start with one line naming it (decisions §10)", () => {
    const garbled = "-----BEGIN PRIVATE KEY-----\nnot base64 at all\n-----END PRIVATE KEY-----"
    expect(refused({ RSA_PRIVATE_KEY: garbled })).toBe("RSA_PRIVATE_KEY")
    // an Ed25519 key is a readable key but not one the service signs RS256 with
    const ed = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }).toString()
    expect(refused({ RSA_PRIVATE_KEY: ed })).toBe("RSA_PRIVATE_KEY")
    expect(refused({ RSA_PREVIOUS_PUBLIC_KEYS: "-----BEGIN PUBLIC KEY-----\n@@@@\n-----END PUBLIC KEY-----" })).toBe("RSA_PREVIOUS_PUBLIC_KEYS")
    for (const DNS_RESOLVER of ["localhost:5353", "dns.example:53", "1.1.1.1:99999", "::1:53x"]) expect(refused({ DNS_RESOLVER })).toBe("DNS_RESOLVER")
    for (const WEBAUTHN_ORIGIN of ["garbage", "ftp://example.com", "https://example.com/path"]) expect(refused({ WEBAUTHN_ORIGIN })).toBe("WEBAUTHN_ORIGIN")
    for (const WEBAUTHN_RP_ID of ["https://example.com", "example.com:443", "ex ample.com"]) expect(refused({ WEBAUTHN_RP_ID })).toBe("WEBAUTHN_RP_ID")
    expect(refused({ HOST: "not a host" })).toBe("HOST")
  })

  test("well-formed values pass", () => {
    const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 })
    const config = loadConfig({
      ...base,
      RSA_PRIVATE_KEY: rsa.privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      RSA_PREVIOUS_PUBLIC_KEYS: rsa.publicKey.export({ type: "spki", format: "pem" }).toString(),
      DNS_RESOLVER: "[::1]:5353",
      WEBAUTHN_ORIGIN: "https://auth.example.com",
      WEBAUTHN_RP_ID: "example.com",
      HOST: "127.0.0.1",
      PUBLIC_BASE_URL: "https://auth.example.com/base"
    })
    expect(config.webauthn).toMatchObject({ rpId: "example.com", origin: "https://auth.example.com" })
    expect(loadConfig({ ...base, DNS_RESOLVER: "127.0.0.1:5353", PUBLIC_BASE_URL: "https://auth.example.com/base" }).webauthn.origin).toBe("https://auth.example.com")
  })
})
