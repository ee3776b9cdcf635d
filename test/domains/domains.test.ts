import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { normaliseDomain } from "../../src/domains/Name.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { startDnsServer, type TestDnsServer } from "./dnsServer.ts"

let app: TestApp
let dns: TestDnsServer
let dev: { apiKey: string; developerId: string }
let other: { apiKey: string; developerId: string }

beforeAll(async () => {
  dns = await startDnsServer()
  app = await startTestApp({ env: { DNS_RESOLVER: dns.address } })
  dev = await app.signup({ plan: "enterprise" })
  other = await app.signup({ plan: "enterprise" })
}, 120_000)
afterAll(async () => {
  await app.stop()
  await dns.close()
}, 120_000)

const create = (domain: unknown, apiKey = dev.apiKey) => app.request("POST", "/v1/domains", { apiKey, body: { domain } })
const verify = (id: string, apiKey = dev.apiKey) => app.request("POST", `/v1/domains/${id}/verify`, { apiKey })

describe("POST /v1/domains", () => {
  test("201 with the verification token and instructions; listed unverified", async () => {
    const res = await create("Example.COM.")
    expect(res.status).toBe(201)
    const token = res.body.verificationToken
    expect(token).toMatch(/^[A-Za-z0-9_-]{32}$/)
    expect(res.body).toEqual({
      id: expect.stringMatching(/^dom_[0-9A-Z]{26}$/),
      domain: "example.com",
      verified: false,
      verifiedAt: null,
      createdAt: expect.stringMatching(/Z$/),
      verificationToken: token,
      instructions: expect.stringContaining(`_agent-auth.example.com`),
      verificationRecord: { type: "TXT", name: "_agent-auth.example.com", value: `agent-auth-verify=${token}` }
    })
    expect(res.body.instructions).toContain(`agent-auth-verify=${token}`)
    const list = await app.request("GET", "/v1/domains", { apiKey: dev.apiKey })
    expect(list.status).toBe(200)
    expect(list.body.domains).toContainEqual({ id: res.body.id, domain: "example.com", verified: false, verifiedAt: null, createdAt: res.body.createdAt })
    // the list shows the interface's Domain fields only (no token)
    expect(Object.keys(list.body.domains[0]).sort()).toEqual(["createdAt", "domain", "id", "verified", "verifiedAt"])
  })

  test("IDN names are stored in ASCII (punycode)", async () => {
    const res = await create("Bücher.Example")
    expect(res.status).toBe(201)
    expect(res.body.domain).toBe("xn--bcher-kva.example")
    expect(res.body.verificationRecord.name).toBe("_agent-auth.xn--bcher-kva.example")
  })

  test.each([
    "", "   ", "localhost", "127.0.0.1", "127.1", "::1", "[::1]", "10.0.0.1.", "http://example.org", "example.org/path",
    "example.org:443", "*.example.org", "-bad.example.org", "bad-.example.org", "a..b.org", "under_score.example.org",
    `${"a".repeat(64)}.example.org`, `${"abcdefghi.".repeat(26)}org`, "example.123", "user@example.org"
  ])("400 BAD_REQUEST for %p", async (domain) => {
    const res = await create(domain)
    expect(res.status).toBe(400)
    expect(res.body.code).toBe("BAD_REQUEST")
  })

  test("a name is accepted only if its verification record name fits in 253 characters", async () => {
    // labels of 60 characters: 4 × 61 = 244 with dots; trimmed to the two lengths either side of the bound
    const name = (length: number) => {
      const full = Array.from({ length: 4 }, (_, i) => String.fromCharCode(97 + i).repeat(60)).join(".") + ".org"
      return full.slice(full.length - length).replace(/^[.]/, "x")
    }
    expect(name(241)).toHaveLength(241)
    const fits = await create(name(241))
    expect(fits.status).toBe(201)
    expect(fits.body.verificationRecord.name).toHaveLength(253)
    const tooLong = await create(name(242))
    expect([tooLong.status, tooLong.body.code]).toEqual([400, "BAD_REQUEST"])
  })

  test("400 BAD_REQUEST without domain; 401 without a key", async () => {
    const missing = await app.request("POST", "/v1/domains", { apiKey: dev.apiKey, body: {} })
    expect(missing.status).toBe(400)
    expect(missing.body.code).toBe("BAD_REQUEST")
    const anon = await app.request("POST", "/v1/domains", { body: { domain: "x.example" } })
    expect(anon.status).toBe(401)
    expect(anon.body.code).toBe("UNAUTHORIZED")
    expect((await app.request("GET", "/v1/domains")).status).toBe(401)
    expect((await app.request("GET", "/v1/domains")).body.code).toBe("UNAUTHORIZED")
  })

  test("409 CONFLICT when this developer already added it (any spelling)", async () => {
    expect((await create("dup.example.net")).status).toBe(201)
    const again = await create("DUP.example.net.")
    expect(again.status).toBe(409)
    expect(again.body.code).toBe("CONFLICT")
  })
})

describe("POST /v1/domains/:id/verify against a DNS server", () => {
  test("found: the TXT record holds the token → verified", async () => {
    const created = await create("found.example")
    dns.txt.set("_agent-auth.found.example", ["v=spf1 -all", `agent-auth-verify=${created.body.verificationToken}`])
    const res = await verify(created.body.id)
    expect(res.status).toBe(200)
    expect(res.body).toEqual({
      id: created.body.id, domain: "found.example", verified: true,
      verifiedAt: expect.stringMatching(/Z$/), createdAt: created.body.createdAt
    })
    expect(dns.queries).toContainEqual({ name: "_agent-auth.found.example", type: 16 })
    const list = await app.request("GET", "/v1/domains", { apiKey: dev.apiKey })
    expect(list.body.domains.find((d: any) => d.id === created.body.id)).toMatchObject({ verified: true, verifiedAt: res.body.verifiedAt })
    // verifying again answers the same, without changing verifiedAt
    const again = await verify(created.body.id)
    expect(again.status).toBe(200)
    expect(again.body.verifiedAt).toBe(res.body.verifiedAt)
  })

  test("found: a value split in several character-strings is joined", async () => {
    const created = await create("split.example")
    const value = `agent-auth-verify=${created.body.verificationToken}`
    dns.txt.set("_agent-auth.split.example", [value + " ".repeat(300)])
    expect((await verify(created.body.id)).status).toBe(200)
  })

  test("missing: 422 VERIFICATION_FAILED, still unverified", async () => {
    const created = await create("missing.example")
    const res = await verify(created.body.id)
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("VERIFICATION_FAILED")
    expect(res.body.message).toContain("No TXT record")
    const rows = await app.query(`SELECT verified_at FROM domains WHERE id = $1`, [created.body.id])
    expect(rows[0].verifiedAt).toBeNull()
  })

  test("wrong value: 422 VERIFICATION_FAILED (another token, another domain's token)", async () => {
    const a = await create("wrong.example")
    const b = await create("wrong2.example")
    dns.txt.set("_agent-auth.wrong.example", [`agent-auth-verify=${b.body.verificationToken}`, "agent-auth-verify="])
    const res = await verify(a.body.id)
    expect(res.status).toBe(422)
    expect(res.body.code).toBe("VERIFICATION_FAILED")
    expect(res.body.message).toContain("does not hold the expected value")
    // fixing the record then verifies
    dns.txt.set("_agent-auth.wrong.example", [`agent-auth-verify=${a.body.verificationToken}`])
    expect((await verify(a.body.id)).status).toBe(200)
  })

  test("DNS server failure: 502 DNS_UNAVAILABLE", async () => {
    const created = await create("servfail.example")
    dns.failing.add("_agent-auth.servfail.example")
    const res = await verify(created.body.id)
    expect(res.status).toBe(502)
    expect(res.body.code).toBe("DNS_UNAVAILABLE")
  })

  test("404 NOT_FOUND for an unknown id and for another developer's domain", async () => {
    expect((await verify("dom_01ARZ3NDEKTSV4RRFFQ69G5FAV")).status).toBe(404)
    const created = await create("mine.example")
    const res = await verify(created.body.id, other.apiKey)
    expect(res.status).toBe(404)
    expect(res.body.code).toBe("NOT_FOUND")
    expect((await app.request("POST", `/v1/domains/${created.body.id}/verify`)).status).toBe(401)
  })
})

describe("one domain belongs to one developer", () => {
  test("a domain verified by one developer cannot be added, nor verified, by another", async () => {
    // both claim it while unverified: claims do not block each other
    const mine = await create("owned.example")
    const theirs = await create("owned.example", other.apiKey)
    expect(theirs.status).toBe(201)
    dns.txt.set("_agent-auth.owned.example", [
      `agent-auth-verify=${mine.body.verificationToken}`,
      `agent-auth-verify=${theirs.body.verificationToken}`
    ])
    expect((await verify(mine.body.id)).status).toBe(200)
    const late = await verify(theirs.body.id, other.apiKey)
    expect(late.status).toBe(409)
    expect(late.body.code).toBe("CONFLICT")
    const third = await app.signup()
    const add = await create("OWNED.example", third.apiKey)
    expect(add.status).toBe(409)
    expect(add.body.code).toBe("CONFLICT")
    // once the owner deletes it, it is free again
    expect((await app.request("DELETE", `/v1/domains/${mine.body.id}`, { apiKey: dev.apiKey })).status).toBe(204)
    expect((await verify(theirs.body.id, other.apiKey)).status).toBe(200)
  })
})

describe("tenant isolation and DELETE /v1/domains/:id", () => {
  test("lists show only the caller's domains", async () => {
    const dev3 = await app.signup()
    await create("iso-a.example", dev3.apiKey)
    const list = await app.request("GET", "/v1/domains", { apiKey: dev3.apiKey })
    expect(list.body.domains.map((d: any) => d.domain)).toEqual(["iso-a.example"])
    const mine = await app.request("GET", "/v1/domains", { apiKey: dev.apiKey })
    expect(mine.body.domains.map((d: any) => d.domain)).not.toContain("iso-a.example")
  })

  test("204, then 404; another developer's answers 404 and stays", async () => {
    const created = await create("gone.example")
    const foreign = await app.request("DELETE", `/v1/domains/${created.body.id}`, { apiKey: other.apiKey })
    expect(foreign.status).toBe(404)
    expect(foreign.body.code).toBe("NOT_FOUND")
    const res = await app.request("DELETE", `/v1/domains/${created.body.id}`, { apiKey: dev.apiKey })
    expect(res.status).toBe(204)
    expect(res.text).toBe("")
    const again = await app.request("DELETE", `/v1/domains/${created.body.id}`, { apiKey: dev.apiKey })
    expect(again.status).toBe(404)
    expect((await app.request("DELETE", `/v1/domains/${created.body.id}`)).status).toBe(401)
  })
})

describe("normaliseDomain", () => {
  test("case, trailing dot, IDN", () => {
    expect(normaliseDomain(" WWW.Example.Com. ")).toEqual({ ok: true, domain: "www.example.com" })
    expect(normaliseDomain("münchen.de")).toEqual({ ok: true, domain: "xn--mnchen-3ya.de" })
    expect(normaliseDomain("xn--mnchen-3ya.de")).toEqual({ ok: true, domain: "xn--mnchen-3ya.de" })
    expect(normaliseDomain("0x7f.1").ok).toBe(false)
  })
})
