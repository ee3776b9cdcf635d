/**
 * SCIM 2.0 (decisions §11) against the real service: tokens and settings, discovery, RFC 7644 edge
 * cases of lists, filters, ETags and PATCH, the SCIM error shape for every refusal (never a 500),
 * tenant isolation, body limits and the per-token rate limit.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { ENTERPRISE, ERROR, GROUP, newUser, patch, q, SCIM, type ScimClient, scimClient, scimError } from "./support.ts"

let app: TestApp
let c: ScimClient
beforeAll(async () => {
  app = await startTestApp()
  c = await scimClient(app)
})
afterAll(() => app.stop())

const create = async (client: ScimClient, userName: string, extra: Record<string, unknown> = {}) => {
  const res = await client.send("POST", "/Users", newUser(userName, extra))
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`)
  return res.body
}

describe("SCIM tokens and settings (API key)", () => {
  test("a token is shown once, stored hashed, listed without its secret, and stops working once deleted", async () => {
    const { apiKey } = await app.signup()
    const created = await app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: "Okta", expiresIn: "90d" } })
    expect(created.status).toBe(201)
    expect(created.body).toEqual({
      id: expect.stringMatching(/^scimtok_/),
      tokenId: created.body.id,
      label: "Okta",
      token: expect.stringMatching(/^scim_[A-Za-z0-9_-]{43}$/),
      createdAt: expect.any(String),
      lastUsedAt: null,
      expiresAt: new Date(Date.parse(created.body.createdAt) + 90 * 86_400_000).toISOString()
    })
    const [row] = await app.query("SELECT token_hash AS hash FROM scim_tokens WHERE id = $1", [created.body.id])
    expect(row.hash).toBe(new Bun.CryptoHasher("sha256").update(created.body.token).digest("hex"))
    const token = created.body.token
    expect((await app.request("GET", "/scim/v2/Users", { bearer: token })).status).toBe(200)
    const list = await app.request("GET", "/v1/scim/tokens", { apiKey })
    expect(list.body.tokens).toEqual([{ id: created.body.id, label: "Okta", createdAt: created.body.createdAt, lastUsedAt: expect.any(String), expiresAt: created.body.expiresAt }])
    expect(list.text).not.toContain(token)
    expect((await app.request("DELETE", `/v1/scim/tokens/${created.body.id}`, { apiKey })).status).toBe(204)
    const after = await app.request("GET", "/scim/v2/Users", { bearer: token })
    expect(after.status).toBe(401)
    expect(after.headers.get("www-authenticate")).toBe("Bearer")
    expect(after.headers.get("content-type")).toStartWith(SCIM)
    expect(after.body).toEqual(scimError(401))
    expect((await app.request("DELETE", `/v1/scim/tokens/${created.body.id}`, { apiKey })).body.code).toBe("NOT_FOUND")
    // an expired token stops working too
    const other = await app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: "short", expiresIn: "1d" } })
    expect((await app.request("GET", "/scim/v2/Users", { bearer: other.body.token })).status).toBe(200)
    await app.query("UPDATE scim_tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [other.body.id])
    expect((await app.request("GET", "/scim/v2/Users", { bearer: other.body.token })).body).toEqual(scimError(401))
  })

  test("at most 10 live tokens; label and expiresIn are checked", async () => {
    const { apiKey } = await app.signup()
    const bad = await Promise.all([
      app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: "" } }),
      app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: "x".repeat(101) } }),
      app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: "a", expiresIn: "12h" } }),
      app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: "a", expiresIn: "731d" } })
    ])
    for (const r of bad) expect([r.status, r.body.code]).toEqual([400, "BAD_REQUEST"])
    const made = await Promise.all(Array.from({ length: 11 }, (_, i) => app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: `t${i}` } })))
    expect(made.filter((r) => r.status === 201)).toHaveLength(10)
    expect(made.filter((r) => r.status === 409).map((r) => r.body.code)).toEqual(["CONFLICT"])
  })

  test("an API key is not a SCIM token and a SCIM token is not an API key", async () => {
    expect((await app.request("GET", "/scim/v2/Users", { bearer: c.apiKey })).status).toBe(401)
    expect((await app.request("GET", "/scim/v2/Users")).body).toEqual(scimError(401))
    expect((await app.request("GET", "/v1/scim/tokens", { bearer: c.token })).status).toBe(401)
  })

  test("settings: principalId from externalId; the attribute cannot change once users exist", async () => {
    const d = await scimClient(app)
    expect((await app.request("GET", "/v1/scim/settings", { apiKey: d.apiKey })).body).toEqual({ principalIdAttribute: "userName", deprovision: "revoke" })
    const set = await app.request("PATCH", "/v1/scim/settings", { apiKey: d.apiKey, body: { principalIdAttribute: "externalId" } })
    expect(set.body).toEqual({ principalIdAttribute: "externalId", deprovision: "revoke" })
    const missing = await d.send("POST", "/Users", newUser("no-ext@example.com"))
    expect([missing.status, missing.body.scimType]).toEqual([400, "invalidValue"])
    const user = await create(d, "ext@example.com", { externalId: "EXT-1" })
    expect(user["urn:ietf:params:scim:schemas:extension:agentauth:2.0:User"]).toEqual({ principalId: "EXT-1" })
    // principalId is read-only
    const ro = await d.send("PATCH", `/Users/${user.id}`, patch({ op: "replace", path: "urn:ietf:params:scim:schemas:extension:agentauth:2.0:User:principalId", value: "x" }))
    expect([ro.status, ro.body.scimType]).toEqual([400, "mutability"])
    const change = await app.request("PATCH", "/v1/scim/settings", { apiKey: d.apiKey, body: { principalIdAttribute: "userName" } })
    expect([change.status, change.body.code]).toEqual([409, "CONFLICT"])
    const audit = await app.query("SELECT action FROM audit_log WHERE developer_id = $1 ORDER BY seq", [d.developerId])
    expect(audit.map((a) => a.action)).toEqual(["service.scim.token_created", "service.scim.settings_changed", "service.scim.user_provisioned"])
  })
})

describe("discovery", () => {
  test("ServiceProviderConfig tells the truth; ResourceTypes and Schemas answer", async () => {
    const spc = await c.send("GET", "/ServiceProviderConfig")
    expect(spc.headers.get("content-type")).toStartWith(SCIM)
    expect(spc.body).toMatchObject({
      patch: { supported: true }, bulk: { supported: false }, filter: { supported: true, maxResults: 200 },
      changePassword: { supported: false }, sort: { supported: false }, etag: { supported: true }
    })
    expect((await c.send("GET", "/ResourceTypes")).body.Resources.map((r: any) => r.id)).toEqual(["User", "Group"])
    expect((await c.send("GET", "/ResourceTypes/User")).body.schemaExtensions[0].schema).toBe(ENTERPRISE)
    expect((await c.send("GET", "/Schemas")).body.totalResults).toBe(4)
    expect((await c.send("GET", `/Schemas/${GROUP}`)).body.id).toBe(GROUP)
    expect((await c.send("GET", "/Schemas/urn:nope")).body).toEqual(scimError(404))
    // a lone "%" once the router has decoded "%25": not found, not a 500 (the fuzz suite found it)
    expect((await c.send("GET", "/Schemas/%25")).body).toEqual(scimError(404))
    expect((await c.send("GET", `/Schemas/${encodeURIComponent(encodeURIComponent(GROUP))}`)).body.id).toBe(GROUP)
  })

  test("discovery answers without a token (it holds no tenant data); the resources still need one", async () => {
    for (const path of ["/ServiceProviderConfig", "/ResourceTypes", "/ResourceTypes/User", "/Schemas", `/Schemas/${GROUP}`]) {
      const res = await app.request("GET", `/scim/v2${path}`)
      expect([path, res.status, res.headers.get("content-type")?.startsWith(SCIM)]).toEqual([path, 200, true])
    }
    expect((await app.request("GET", "/scim/v2/ServiceProviderConfig")).body.filter).toEqual({ supported: true, maxResults: 200 })
    const users = await app.request("GET", "/scim/v2/Users")
    expect([users.status, users.body.status]).toEqual([401, "401"])
  })
})

describe("lists and filters (RFC 7644 §3.4.2)", () => {
  let d: ScimClient
  beforeAll(async () => {
    d = await scimClient(app)
    for (const [name, dept] of [["ann@Example.com", "Sales"], ["bob@example.com", "R&D"], ["carl@other.org", "Sales"]] as const) {
      await create(d, name, { displayName: name.split("@")[0], [ENTERPRISE]: { department: dept } })
    }
  })
  const names = async (filter: string) => {
    const res = await d.send("GET", `/Users?filter=${q(filter)}`)
    if (res.status !== 200) throw new Error(`${filter}: ${res.status} ${res.text}`)
    return res.body.Resources.map((r: any) => r.userName).sort()
  }

  test("count 0, startIndex 0 and past the end, count above the maximum", async () => {
    expect((await d.send("GET", "/Users?count=0")).body).toEqual({
      schemas: ["urn:ietf:params:scim:api:messages:2.0:ListResponse"], totalResults: 3, startIndex: 1, itemsPerPage: 0, Resources: []
    })
    const zero = await d.send("GET", "/Users?startIndex=0&count=2")
    expect([zero.body.startIndex, zero.body.itemsPerPage, zero.body.totalResults]).toEqual([1, 2, 3])
    const second = await d.send("GET", "/Users?startIndex=3&count=2")
    expect([second.body.itemsPerPage, second.body.Resources[0].userName]).toEqual([1, "carl@other.org"])
    const past = await d.send("GET", "/Users?startIndex=10")
    expect([past.status, past.body.totalResults, past.body.itemsPerPage, past.body.Resources]).toEqual([200, 3, 0, []])
    expect((await d.send("GET", "/Users?count=5000")).body.itemsPerPage).toBe(3)
    const bad = await d.send("GET", "/Users?count=abc")
    expect(bad.body).toEqual(scimError(400, "invalidValue"))
  })

  test("every operator, and/or/not, grouping, value paths; case rules per attribute", async () => {
    expect(await names('userName eq "ANN@example.COM"')).toEqual(["ann@Example.com"])
    expect(await names('USERNAME Eq "bob@example.com"')).toEqual(["bob@example.com"])
    expect(await names('userName ne "bob@example.com"')).toEqual(["ann@Example.com", "carl@other.org"])
    expect(await names('userName co "EXAMPLE"')).toEqual(["ann@Example.com", "bob@example.com"])
    expect(await names('userName sw "B"')).toEqual(["bob@example.com"])
    expect(await names('userName ew ".ORG"')).toEqual(["carl@other.org"])
    expect(await names('userName gt "b"')).toEqual(["bob@example.com", "carl@other.org"])
    expect(await names('userName le "bob@example.com"')).toEqual(["ann@Example.com", "bob@example.com"])
    expect(await names("displayName pr")).toHaveLength(3)
    expect(await names("externalId pr")).toEqual([])
    expect(await names('emails[type eq "work" and value co "other"]')).toEqual(["carl@other.org"])
    expect(await names('emails.value eq "BOB@example.com"')).toEqual(["bob@example.com"])
    expect(await names('emails eq "bob@example.com"')).toEqual(["bob@example.com"])
    expect(await names(`${ENTERPRISE}:department eq "sales" and not (userName sw "c")`)).toEqual(["ann@Example.com"])
    expect(await names('(userName sw "a" or userName sw "c") and active eq true')).toEqual(["ann@Example.com", "carl@other.org"])
    expect(await names('name.familyName eq "FAMILY"')).toHaveLength(3)
    expect(await names('meta.lastModified gt "2000-01-01T00:00:00Z"')).toHaveLength(3)
    expect(await names('userName co "100%_"')).toEqual([])
    const [ann] = (await d.send("GET", `/Users?filter=${q('userName eq "ann@example.com"')}`)).body.Resources
    expect(await names(`id eq "${ann.id}"`)).toEqual(["ann@Example.com"])
    expect(await names(`id eq "${ann.id.toLowerCase()}"`)).toEqual([])
  })

  test("malformed, unknown or oversized filters are 400 invalidFilter", async () => {
    const cases = [
      "userName eq", "userName xx \"a\"", "((userName eq \"a\")", "nosuch eq \"a\"", "active eq \"maybe\"", "active gt true",
      "meta.created gt \"not a date\"", "userName eq 12", "emails[nosuch eq \"a\"]", "emails[type eq \"a\"",
      Array.from({ length: 21 }, (_, i) => `userName eq "u${i}"`).join(" or "),
      `userName eq "${"a".repeat(1000)}"`, "\u0000", "userName eq \"\\"
    ]
    for (const filter of cases) {
      const res = await d.send("GET", `/Users?filter=${q(filter)}`)
      expect([filter, res.status, res.body]).toEqual([filter, 400, scimError(400, "invalidFilter")])
    }
  })

  test("attributes and excludedAttributes", async () => {
    const only = await d.send("GET", `/Users?filter=${q('userName eq "bob@example.com"')}&attributes=userName,name.givenName`)
    expect(only.body.Resources[0]).toEqual({
      schemas: expect.any(Array), id: expect.any(String), userName: "bob@example.com", name: { givenName: "Given" }
    })
    const without = await d.send("GET", `/Users?filter=${q('userName eq "bob@example.com"')}&excludedAttributes=emails,meta`)
    expect(without.body.Resources[0].emails).toBeUndefined()
    expect(without.body.Resources[0].meta).toBeUndefined()
    expect(without.body.Resources[0].userName).toBe("bob@example.com")
  })
})

describe("create, replace, ETags", () => {
  test("a duplicate userName in another case, or a duplicate externalId, is 409 uniqueness; deleted names are free again", async () => {
    const d = await scimClient(app)
    const first = await create(d, "Dup@Example.com", { externalId: "X1" })
    const dup = await d.send("POST", "/Users", newUser("dup@example.COM"))
    expect([dup.status, dup.body]).toEqual([409, scimError(409, "uniqueness")])
    expect(dup.body.status).toBe("409")
    const ext = await d.send("POST", "/Users", newUser("other@example.com", { externalId: "X1" }))
    expect([ext.status, ext.body.scimType]).toEqual([409, "uniqueness"])
    // renaming onto a taken userName
    const second = await create(d, "second@example.com")
    const rename = await d.send("PATCH", `/Users/${second.id}`, patch({ op: "replace", path: "userName", value: "DUP@example.com" }))
    expect([rename.status, rename.body.scimType]).toEqual([409, "uniqueness"])
    expect((await d.send("DELETE", `/Users/${first.id}`)).status).toBe(204)
    expect((await d.send("GET", `/Users/${first.id}`)).body).toEqual(scimError(404))
    expect((await d.send("POST", "/Users", newUser("dup@example.com", { externalId: "X1" }))).status).toBe(201)
    // attribute names are case-insensitive in bodies too
    const cased = await d.send("POST", "/Users", { schemas: [], USERNAME: "Cased@example.com", Name: { GivenName: "C" }, Active: "False" })
    expect([cased.status, cased.body.userName, cased.body.name, cased.body.active]).toEqual([201, "Cased@example.com", { givenName: "C" }, false])
    // the deleted row is kept for audit
    const [kept] = await app.query("SELECT deleted_at AS at, active FROM scim_users WHERE id = $1", [first.id])
    expect([kept.at instanceof Date, kept.active]).toEqual([true, false])
  })

  test("PUT replaces everything but keeps an omitted active; If-Match mismatch 412 on PUT, PATCH, DELETE; If-None-Match 304", async () => {
    const d = await scimClient(app)
    const user = await create(d, "etag@example.com", { displayName: "E", active: false })
    const put = await d.send("PUT", `/Users/${user.id}`, { schemas: [], userName: "etag@example.com" })
    expect(put.status).toBe(200)
    expect(put.body.active).toBe(false)
    expect(put.body.displayName).toBeUndefined()
    expect(put.body.emails).toBeUndefined()
    expect(put.headers.get("etag")).toBe('W/"2"')
    const stale = { "if-match": 'W/"1"' }
    expect((await d.send("PUT", `/Users/${user.id}`, newUser("etag@example.com"), stale)).body).toEqual(scimError(412))
    expect((await d.send("PATCH", `/Users/${user.id}`, patch({ op: "replace", path: "displayName", value: "x" }), stale)).status).toBe(412)
    expect((await d.send("DELETE", `/Users/${user.id}`, undefined, stale)).status).toBe(412)
    const fresh = await d.send("PATCH", `/Users/${user.id}`, patch({ op: "replace", path: "displayName", value: "x" }), { "if-match": 'W/"2"' })
    expect([fresh.status, fresh.headers.get("etag")]).toEqual([200, 'W/"3"'])
    const notModified = await d.send("GET", `/Users/${user.id}`, undefined, { "if-none-match": 'W/"3"' })
    expect([notModified.status, notModified.text]).toEqual([304, ""])
    expect((await d.send("GET", `/Users/${user.id}`, undefined, { "if-none-match": 'W/"2"' })).status).toBe(200)
    // groups too
    const group = await d.send("POST", "/Groups", { schemas: [GROUP], displayName: "G" })
    expect(group.headers.get("etag")).toBe('W/"1"')
    expect(group.headers.get("location")).toEndWith(`/scim/v2/Groups/${group.body.id}`)
    const renamed = await d.send("PATCH", `/Groups/${group.body.id}`, patch({ op: "replace", path: "displayName", value: "H" }), { "if-match": 'W/"1"' })
    expect([renamed.status, renamed.headers.get("etag")]).toEqual([200, 'W/"2"'])
    expect((await d.send("PUT", `/Groups/${group.body.id}`, { schemas: [GROUP], displayName: "I" }, { "if-match": 'W/"1"' })).status).toBe(412)
    expect((await d.send("DELETE", `/Groups/${group.body.id}`, undefined, { "if-match": 'W/"1"' })).status).toBe(412)
    expect((await d.send("GET", `/Groups/${group.body.id}`, undefined, { "if-none-match": 'W/"2"' })).status).toBe(304)
  })
})

describe("PATCH", () => {
  test("all operations apply or none: a half-failing PATCH changes nothing", async () => {
    const d = await scimClient(app)
    const user = await create(d, "half@example.com", { displayName: "Before" })
    const res = await d.send("PATCH", `/Users/${user.id}`, patch(
      { op: "replace", path: "displayName", value: "After" },
      { op: "replace", path: 'emails[type eq "home"].value', value: "h@example.com" }
    ))
    expect([res.status, res.body]).toEqual([400, scimError(400, "noTarget")])
    const after = await d.send("GET", `/Users/${user.id}`)
    expect([after.body.displayName, after.body.meta.version, after.body.emails]).toEqual(["Before", 'W/"1"', user.emails])
    const removeNothing = await d.send("PATCH", `/Users/${user.id}`, patch({ op: "remove", path: 'emails[type eq "home"]' }))
    expect(removeNothing.body.scimType).toBe("noTarget")
  })

  test("every malformed op, path or value is a SCIM error with the right scimType, never a 500", async () => {
    const d = await scimClient(app)
    const user = await create(d, "bad@example.com")
    const cases: Array<[unknown, number, string]> = [
      [{ Operations: [{ op: "replace", path: "displayName", value: "x" }] }, 400, "invalidSyntax"],
      [patch(), 400, "invalidSyntax"],
      [{ schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], Operations: Array.from({ length: 101 }, () => ({ op: "replace", path: "displayName", value: "x" })) }, 400, "invalidSyntax"],
      [patch({ op: "bogus", path: "displayName", value: "x" }), 400, "invalidSyntax"],
      [patch({ op: "replace", path: "displayName" }), 400, "invalidSyntax"],
      [patch({ op: "remove" }), 400, "noTarget"],
      [patch({ op: "replace", path: "nosuch", value: "x" }), 400, "invalidPath"],
      [patch({ op: "replace", path: "emails[type eq", value: "x" }), 400, "invalidPath"],
      [patch({ op: "replace", path: "id", value: "x" }), 400, "mutability"],
      [patch({ op: "replace", path: "meta.created", value: "x" }), 400, "mutability"],
      [patch({ op: "replace", path: "active", value: "maybe" }), 400, "invalidValue"],
      [patch({ op: "replace", path: "userName", value: "" }), 400, "invalidValue"],
      [patch({ op: "replace", path: "userName", value: 12 }), 400, "invalidValue"],
      [patch({ op: "replace", value: "not an object" }), 400, "invalidValue"],
      [patch({ op: "replace", path: "emails", value: Array.from({ length: 21 }, (_, i) => ({ value: `${i}@x` })) }), 400, "invalidValue"],
      [patch({ op: "replace", path: 17, value: "x" }), 400, "invalidPath"],
      [[1, 2], 400, "invalidSyntax"]
    ]
    for (const [body, status, scimType] of cases) {
      const res = await d.send("PATCH", `/Users/${user.id}`, body)
      expect([JSON.stringify(body).slice(0, 80), res.status, res.body]).toEqual([JSON.stringify(body).slice(0, 80), status, scimError(status, scimType)])
    }
    // attributes identity providers send that we do not store are accepted and dropped
    const ignored = await d.send("PATCH", `/Users/${user.id}`, patch({ op: "Add", path: 'addresses[type eq "work"].formatted', value: "1 Main St" }, { op: "replace", path: "title", value: "CEO" }))
    expect([ignored.status, ignored.body.addresses, ignored.body.title, ignored.body.meta.version]).toEqual([200, undefined, undefined, 'W/"1"'])
    expect((await d.send("PATCH", "/Users/scimuser_nope", patch({ op: "replace", path: "displayName", value: "x" }))).body).toEqual(scimError(404))
  })

  test("bodies: not JSON, another media type, nested too deep, over 1 MiB (declared or chunked): SCIM errors", async () => {
    const raw = (body: string | ReadableStream, type = "application/scim+json") =>
      fetch(`${app.url}/scim/v2/Users`, { method: "POST", headers: { authorization: `Bearer ${c.token}`, "content-type": type }, body, duplex: "half" } as any)
    const notJson = await raw("{nope")
    expect([notJson.status, notJson.headers.get("content-type")?.startsWith(SCIM), await notJson.json()]).toEqual([400, true, scimError(400, "invalidSyntax")])
    const text = await raw("{}", "text/plain")
    expect([text.status, await text.json()]).toEqual([415, scimError(415)])
    const deep = await raw("[".repeat(70) + "]".repeat(70))
    expect([deep.status, (await deep.json()).scimType]).toEqual([400, "invalidSyntax"])
    const big = JSON.stringify(newUser("big@example.com", { displayName: "x".repeat(1024 * 1024) }))
    const declared = await raw(big)
    expect([declared.status, await declared.json()]).toEqual([413, scimError(413)])
    const chunks = [new TextEncoder().encode(big.slice(0, 600_000)), new TextEncoder().encode(big.slice(600_000))]
    const chunked = await raw(new ReadableStream({ pull: (ctl) => { const next = chunks.shift(); next ? ctl.enqueue(next) : ctl.close() } }))
    expect([chunked.status, (await chunked.json()).status]).toEqual([413, "413"])
    const unknown = await app.request("GET", "/scim/v2/Nope", { bearer: c.token })
    expect([unknown.status, unknown.body.schemas]).toEqual([404, [ERROR]])
  })
})

test("the directory as other capabilities read it: a principal, its state and its groups; a deleted user leaves its groups", async () => {
  const { Effect } = await import("effect")
  const { DirectoryPrincipals } = await import("../../src/directory/Principals.ts")
  const d = await scimClient(app)
  const user = await create(d, "reader@example.com", { externalId: "R-1" })
  const group = (await d.send("POST", "/Groups", { schemas: [GROUP], displayName: "Admins", members: [{ value: user.id }] })).body
  const describe_ = (principalId: string) => app.run(Effect.flatMap(DirectoryPrincipals, (p) => p.describe(d.developerId, principalId)))
  expect(await describe_("reader@example.com")).toEqual({
    scimUserId: user.id, principalId: "reader@example.com", userName: "reader@example.com", externalId: "R-1", active: true,
    groups: [{ id: group.id, displayName: "Admins" }]
  })
  expect(await describe_("nobody")).toBeUndefined()
  expect((await d.send("DELETE", `/Users/${user.id}`)).status).toBe(204)
  expect(await describe_("reader@example.com")).toBeUndefined()
  expect((await d.send("GET", `/Groups/${group.id}`)).body.members).toEqual([])
  const [event] = await app.query("SELECT data FROM events WHERE developer_id = $1 AND type = 'scim.group.updated' ORDER BY id DESC LIMIT 1", [d.developerId])
  expect(event.data).toEqual({ groupId: group.id, added: [], removed: [user.id] })
})

test("group PATCH: replace members, unknown members, a filter that matches no member, more than 1,000 values", async () => {
  const d = await scimClient(app)
  const [u1, u2, u3] = [await create(d, "g1@example.com"), await create(d, "g2@example.com"), await create(d, "g3@example.com")]
  const g = (await d.send("POST", "/Groups", { schemas: [GROUP], displayName: "G", members: [{ value: u1.id }, { value: u2.id }] })).body
  const replaced = await d.send("PATCH", `/Groups/${g.id}`, patch({ op: "replace", path: "members", value: [{ value: u2.id }, { value: u3.id }] }))
  expect(replaced.body.members.map((m: any) => m.value).sort()).toEqual([u2.id, u3.id].sort())
  const [event] = await app.query("SELECT data FROM events WHERE developer_id = $1 AND type = 'scim.group.updated' ORDER BY id DESC LIMIT 1", [d.developerId])
  expect(event.data).toEqual({ groupId: g.id, added: [u3.id], removed: [u1.id] })
  const cases: Array<[unknown, string]> = [
    [patch({ op: "add", path: "members", value: [{ value: "scimuser_unknown" }] }), "invalidValue"],
    [patch({ op: "remove", path: `members[value eq "${u1.id}"]` }), "noTarget"],
    [patch({ op: "add", path: "members", value: Array.from({ length: 1001 }, (_, i) => ({ value: `u${i}` })) }), "invalidValue"],
    [patch({ op: "add", path: "members", value: [{ display: "no value" }] }), "invalidValue"],
    [patch({ op: "replace", path: "displayName", value: "" }), "invalidValue"],
    [patch({ op: "replace", path: "members[value eq \"x\"].display", value: "x" }), "invalidPath"],
    [patch({ op: "replace", path: "owner", value: "x" }), "invalidPath"]
  ]
  for (const [body, scimType] of cases) {
    const res = await d.send("PATCH", `/Groups/${g.id}`, body)
    expect([scimType, res.status, res.body]).toEqual([scimType, 400, scimError(400, scimType)])
  }
  const after = await d.send("GET", `/Groups/${g.id}`)
  expect([after.body.displayName, after.body.members.length, after.body.meta.version]).toEqual(["G", 2, 'W/"2"'])
})

describe("tenant isolation", () => {
  test("a token of one developer never sees or touches another's users and groups", async () => {
    const a = await scimClient(app)
    const b = await scimClient(app)
    const user = await create(a, "mine@example.com", { externalId: "A-1" })
    const group = (await a.send("POST", "/Groups", { schemas: [GROUP], displayName: "A team", members: [{ value: user.id }] })).body
    expect((await b.send("GET", "/Users")).body.totalResults).toBe(0)
    expect((await b.send("GET", `/Users?filter=${q('userName eq "mine@example.com"')}`)).body.totalResults).toBe(0)
    expect((await b.send("GET", `/Users/${user.id}`)).status).toBe(404)
    expect((await b.send("PUT", `/Users/${user.id}`, newUser("mine@example.com"))).status).toBe(404)
    expect((await b.send("PATCH", `/Users/${user.id}`, patch({ op: "replace", value: { active: false } }))).status).toBe(404)
    expect((await b.send("DELETE", `/Users/${user.id}`)).status).toBe(404)
    expect((await b.send("GET", `/Groups/${group.id}`)).status).toBe(404)
    expect((await b.send("GET", `/Groups?filter=${q(`members.value eq "${user.id}"`)}`)).body.totalResults).toBe(0)
    // b may use the same userName and externalId
    expect((await b.send("POST", "/Users", newUser("mine@example.com", { externalId: "A-1" }))).status).toBe(201)
    // and cannot put a's user in its group
    const theirs = await b.send("POST", "/Groups", { schemas: [GROUP], displayName: "B team", members: [{ value: user.id }] })
    expect([theirs.status, theirs.body.scimType]).toEqual([400, "invalidValue"])
    // version 2 is a's own group's membership; nothing b did moved it
    const still = await a.send("GET", `/Users/${user.id}`)
    expect([still.body.active, still.body.meta.version]).toEqual([true, 'W/"2"'])
  })
})

test("SCIM requests are limited per token (429 in the SCIM shape with Retry-After) and do not draw on the plan budget", async () => {
  const limited = await startTestApp({ env: { RATE_LIMIT_SCALE: "0.005" } })
  try {
    const d = await scimClient(limited, "enterprise")
    const answers = []
    for (let i = 0; i < 4; i++) answers.push(await d.send("GET", "/Users?count=0"))
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 429])
    expect(answers[0]!.headers.get("x-ratelimit-limit")).toBe("3")
    expect(answers[3]!.headers.get("retry-after")).not.toBeNull()
    expect(answers[3]!.headers.get("content-type")).toStartWith(SCIM)
    expect(answers[3]!.body).toEqual(scimError(429))
    // a developer's tokens together: 6 a minute at this scale (two tokens' worth), so a third token gets none
    const more = await Promise.all([1, 2].map(() => limited.request("POST", "/v1/scim/tokens", { apiKey: d.apiKey, body: { label: "more" } })))
    const second = more[0]!.body.token
    const third = more[1]!.body.token
    const viaSecond = []
    for (let i = 0; i < 3; i++) viaSecond.push((await limited.request("GET", "/scim/v2/Users?count=0", { bearer: second })).status)
    expect(viaSecond).toEqual([200, 200, 200])
    const viaThird = await limited.request("GET", "/scim/v2/Users?count=0", { bearer: third })
    expect([viaThird.status, viaThird.body.status]).toEqual([429, "429"])
  } finally {
    await limited.stop()
  }
  // the developer's plan budget is untouched by SCIM traffic
  const remaining = async () => Number((await app.request("GET", "/v1/me", { apiKey: c.apiKey })).headers.get("x-ratelimit-remaining"))
  const before = await remaining()
  for (let i = 0; i < 5; i++) expect((await c.send("GET", "/Users?count=0")).headers.get("x-ratelimit-limit")).toBe("600")
  expect(await remaining()).toBeGreaterThanOrEqual(before - 1)
})

test("fuzz: random bodies, filters and paths with a valid SCIM token never give a 5xx", async () => {
  const fc = (await import("fast-check")).default
  const d = await scimClient(app)
  const user = await create(d, "fuzz@example.com")
  const group = (await d.send("POST", "/Groups", { schemas: [GROUP], displayName: "fuzz" })).body
  const value = fc.oneof(fc.anything({ maxDepth: 3 }), fc.constantFrom("False", "True", null, [], {}, "x".repeat(2000)))
  const path = fc.oneof(
    fc.string({ maxLength: 40 }),
    fc.constantFrom("emails[type eq \"work\"].value", "name.familyName", "members", "members[value eq \"x\"]", `${ENTERPRISE}:manager`, "emails[", "a.b.c.d", "active")
  )
  const op = fc.record({ op: fc.oneof(fc.constantFrom("add", "Remove", "REPLACE"), fc.string({ maxLength: 8 })), path: fc.option(path, { nil: undefined }), value: fc.option(value, { nil: undefined }) })
  const body = fc.oneof(
    fc.record({ schemas: fc.constant(["urn:ietf:params:scim:api:messages:2.0:PatchOp"]), Operations: fc.array(op, { maxLength: 5 }) }),
    fc.dictionary(fc.constantFrom("userName", "displayName", "active", "emails", "name", "members", "externalId", ENTERPRISE, "schemas"), value),
    fc.anything({ maxDepth: 3 })
  )
  const target = fc.constantFrom(["POST", "/Users"], ["PUT", `/Users/${user.id}`], ["PATCH", `/Users/${user.id}`], ["POST", "/Groups"], ["PUT", `/Groups/${group.id}`], ["PATCH", `/Groups/${group.id}`])
  await fc.assert(fc.asyncProperty(target, body, async ([method, where], b) => {
    const res = await d.send(method!, where!, b)
    expect(res.status).toBeLessThan(500)
    if (res.status >= 400) expect(res.body.schemas).toEqual([ERROR])
  }), { numRuns: 150 })
  const filter = fc.oneof(fc.string({ maxLength: 60 }), fc.constantFrom('userName eq "a" and (', 'emails[value co "%"]', "not not", 'meta.created lt "x"', "members.value eq 1"))
  await fc.assert(fc.asyncProperty(filter, fc.constantFrom("/Users", "/Groups"), async (f, where) => {
    const res = await d.send("GET", `${where}?filter=${q(f)}&startIndex=${encodeURIComponent(f.slice(0, 3))}`)
    expect(res.status).toBeLessThan(500)
  }), { numRuns: 150 })
})
