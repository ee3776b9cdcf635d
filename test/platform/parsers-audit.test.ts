/**
 * decisions §19 (revised), issue 32 item 3: every other parser of caller or provider input, fed a
 * hostile input, answers its refusal at once and the limits are checked before the parser runs.
 * (Cedar: test/policies/hostile.test.ts; SAML/XML: test/sso/saml-hostile.test.ts; JSON bodies over
 * HTTP: test/platform/bodies.test.ts.) "At once" is asserted loosely (under 100 ms, where the
 * unbounded versions took 100 ms to seconds); the bench measures.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Either } from "effect"
import { parsePlans } from "../../src/billing/Plans.ts"
import { holderJwkOf } from "../../src/credentials/Formats.ts"
import { compileFilter } from "../../src/directory/Filter.ts"
import { readPatchBody } from "../../src/directory/Patch.ts"
import { jsonNestsDeeperThan } from "../../src/platform/Body.ts"
import { pinnedFetch } from "../../src/platform/Outbound.ts"
import { inspectCertificate } from "../../src/sso/saml/Certificates.ts"

const timed = <A>(f: () => A): { value: A; ms: number } => {
  const started = performance.now()
  const value = f()
  return { value, ms: performance.now() - started }
}
const nested = (levels: number) => `${"[".repeat(levels)}${"]".repeat(levels)}`

describe("SCIM filters and PATCH paths (§11 bounds, and 32 levels of grouping)", () => {
  const attributes = { username: { kind: "simple", type: "string", sql: "u.user_name", caseExact: false } } as any
  const detail = (text: string) => {
    const out = compileFilter(text, attributes, 1)
    return "detail" in out ? [(out as any).scimType, (out as any).detail] : "compiled"
  }
  test.each([
    ["1,001 characters", `userName eq "${"a".repeat(987)}"`, ["invalidFilter", "filter is longer than 1000 characters"]],
    ["490 nested groups in 1,000 characters", `${"(".repeat(490)}userName eq "a"${")".repeat(490)}`, ["invalidFilter", "filter nests ( and [ deeper than 32 levels"]],
    ["999 unclosed groups", "(".repeat(999), ["invalidFilter", "filter nests ( and [ deeper than 32 levels"]],
    ["21 comparisons", Array(21).fill('userName eq "a"').join(" or "), ["invalidFilter", "filter has more than 20 comparisons"]],
    ["brackets inside a string are text", `userName eq "${"(".repeat(100)}"`, "compiled"],
    ["32 groups", `${"(".repeat(32)}userName eq "a"${")".repeat(32)}`, "compiled"]
  ])("%s", (_label, text, expected) => {
    const { value, ms } = timed(() => detail(text as string))
    expect(value).toEqual(expected)
    expect(ms).toBeLessThan(100)
  })

  test("PATCH: 101 operations, a path over 1,000 characters or nested deeper than 32 levels are refused before any path is parsed", () => {
    const body = (operations: Array<Record<string, unknown>>) => ({ schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], Operations: operations })
    const refusal = (operations: Array<Record<string, unknown>>) => {
      const out = readPatchBody(body(operations))
      return Either.isLeft(out) ? [out.left.scimType, out.left.detail] : "read"
    }
    expect(refusal(Array(101).fill({ op: "remove", path: "displayName" }))).toEqual(["invalidSyntax", "At most 100 operations per request"])
    expect(refusal([{ op: "replace", path: `emails[type eq "${"w".repeat(1000)}"].value`, value: "x" }])).toEqual(["invalidPath", "path must be a string"])
    const deep = `emails[${"(".repeat(480)}type eq "work"${")".repeat(480)}].value`
    const { value, ms } = timed(() => refusal(Array(100).fill({ op: "replace", path: deep, value: "a@b.c" })))
    expect(value).toEqual(["invalidPath", "path nests ( and [ deeper than 32 levels"])
    expect(ms).toBeLessThan(100)
    expect(refusal([{ op: "replace", path: `emails[${"(".repeat(31)}type eq "work"${")".repeat(31)}].value`, value: "a@b.c" }])).toBe("read")
  })
})

describe("JSON bodies (§19: 64 levels)", () => {
  test("the depth check is one linear pass: 1 MiB of brackets is found too deep at once; brackets in strings are text", () => {
    const { value, ms } = timed(() => jsonNestsDeeperThan("[".repeat(1024 * 1024)))
    expect(value).toBe(true)
    expect(ms).toBeLessThan(100)
    expect(jsonNestsDeeperThan(nested(64))).toBe(false)
    expect(jsonNestsDeeperThan(nested(65))).toBe(true)
    expect(jsonNestsDeeperThan(`{"a":"${"[".repeat(500)}\\"["}`)).toBe(false)
  })
})

describe("OIDC discovery and JWKS documents (1 MiB, 64 levels)", () => {
  let server: ReturnType<typeof Bun.serve>
  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (request) => {
        const path = new URL(request.url).pathname
        if (path === "/deep/.well-known/openid-configuration") return new Response(nested(500_000), { headers: { "content-type": "application/json" } })
        if (path === "/big/jwks") return new Response(`{"keys":[${'{"kty":"RSA"},'.repeat(100_000)}{}]}`, { headers: { "content-type": "application/json" } })
        return Response.json({ issuer: "x", keys: [{ kty: "OKP" }] })
      }
    })
  })
  afterAll(() => server.stop(true))
  const fetchAnswer = pinnedFetch({ allowPrivateHosts: true, timeoutMs: 5_000, maxBodyBytes: 1024 * 1024 })

  test("a 1 MiB answer nested 500,000 deep is refused before any library parses it; over 1 MiB is refused unread", async () => {
    await expect(fetchAnswer(`http://127.0.0.1:${server.port}/deep/.well-known/openid-configuration`)).rejects.toThrow("answer nested deeper than 64 levels")
    await expect(fetchAnswer(`http://127.0.0.1:${server.port}/big/jwks`)).rejects.toThrow("answer too large")
    expect(await (await fetchAnswer(`http://127.0.0.1:${server.port}/ok`)).json()).toEqual({ issuer: "x", keys: [{ kty: "OKP" }] })
  })
})

describe("PEM certificates (16 KiB each, 10 per connection)", () => {
  test("900 KiB of junk is refused by its length before any decoder", () => {
    const junk = `-----BEGIN CERTIFICATE-----\n${Buffer.alloc(700_000, 0x30).toString("base64")}\n-----END CERTIFICATE-----`
    const { value, ms } = timed(() => inspectCertificate(junk))
    expect(value).toEqual({ ok: false, reason: "is longer than 16384 characters (not a certificate)" })
    expect(ms).toBeLessThan(100)
  })
})

describe("did:key and JWK holder keys", () => {
  test("a 10,000-character did:key and a JWK with a 500 KB coordinate are refused at once", () => {
    const did = timed(() => holderJwkOf(`did:key:z${"6".repeat(10_000)}`))
    expect(did.value).toEqual({ error: "holderKey must be a public JWK or an Ed25519 did:key" })
    const jwk = timed(() => holderJwkOf({ kty: "OKP", crv: "Ed25519", x: "A".repeat(500_000) }))
    expect(jwk.value).toEqual({ error: "holderKey is not a valid public key" })
    expect(did.ms + jwk.ms).toBeLessThan(100)
  })
})

describe("PLANS_FILE (the operator's file, read once at start)", () => {
  test("a deeply nested or malformed file is one clear problem, not a crash", () => {
    expect(() => parsePlans(`{"pro":{"name":"Pro","limits":{"deep":${nested(100_000)}}}}`)).toThrow("pro.limits.deep is not a limit")
    expect(() => parsePlans("{".repeat(100_000))).toThrow("is not valid JSON")
  })
})
