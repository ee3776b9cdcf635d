/**
 * PATCH stores what it answers (decisions §11, revised): a change to a sub-attribute, a
 * multi-valued element or the enterprise extension is stored, bumps the version and emits one
 * scim.user.updated; a no-op stores nothing; a no-path replace of part of a complex value merges.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import pg from "pg"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { ENTERPRISE, GROUP, newUser, patch, type ScimClient, scimClient } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.stop())

const create = async (client: ScimClient, userName: string, extra: Record<string, unknown> = {}) => {
  const res = await client.send("POST", "/Users", newUser(userName, extra))
  if (res.status !== 201) throw new Error(`${res.status} ${res.text}`)
  return res.body
}

const updatedEvents = (developerId: string, userId: string) =>
  app.query<{ data: any }>(
    "SELECT data FROM events WHERE developer_id = $1 AND type = 'scim.user.updated' AND data->>'scimUserId' = $2 ORDER BY id",
    [developerId, userId]
  ).then((rows) => rows.map((r) => r.data.changedAttributes))

test("Entra's PATCH of only an email and a family name is stored, versioned and announced", async () => {
  const d = await scimClient(app)
  const user = await create(d, "entra@example.com")
  const res = await d.send("PATCH", `/Users/${user.id}`, {
    Operations: [
      { op: "Replace", path: 'emails[type eq "work"].value', value: "x@y" },
      { op: "Replace", path: "name.familyName", value: "F" }
    ],
    schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"]
  })
  expect([res.status, res.body.emails, res.body.name, res.body.meta.version, res.headers.get("etag")]).toEqual([
    200, [{ primary: true, value: "x@y", type: "work" }], { givenName: "Given", familyName: "F" }, 'W/"2"', 'W/"2"'
  ])
  const after = await d.send("GET", `/Users/${user.id}`)
  expect(after.body).toEqual(res.body)
  const [row] = await app.query("SELECT version, resource FROM scim_users WHERE id = $1", [user.id])
  expect([row.version, row.resource.emails[0].value, row.resource.name.familyName]).toEqual([2, "x@y", "F"])
  expect(await updatedEvents(d.developerId, user.id)).toEqual([["name", "emails"]])
})

test("a no-path or complex-path replace changes only the sub-attributes it names (RFC 7644 §3.5.2.3)", async () => {
  const d = await scimClient(app)
  const user = await create(d, "merge@example.com", {
    name: { givenName: "Ada", familyName: "Lovelace", formatted: "Ada Lovelace" },
    [ENTERPRISE]: { employeeNumber: "7", department: "Math", manager: { value: "m-1", displayName: "Babbage" } }
  })
  const steps: Array<[Record<string, unknown>, Record<string, unknown>]> = [
    [{ op: "replace", value: { name: { givenName: "A" } } }, { givenName: "A", familyName: "Lovelace", formatted: "Ada Lovelace" }],
    [{ op: "Replace", value: { "name.familyName": "L" } }, { givenName: "A", familyName: "L", formatted: "Ada Lovelace" }],
    [{ op: "replace", path: "name", value: { formatted: "A L" } }, { givenName: "A", familyName: "L", formatted: "A L" }],
    [{ op: "add", value: { name: { givenName: "Ada" } } }, { givenName: "Ada", familyName: "L", formatted: "A L" }]
  ]
  for (const [operation, name] of steps) {
    const res = await d.send("PATCH", `/Users/${user.id}`, patch(operation))
    expect([JSON.stringify(operation), res.status, res.body.name]).toEqual([JSON.stringify(operation), 200, name])
  }
  const ext = await d.send("PATCH", `/Users/${user.id}`, patch(
    { op: "replace", value: { [ENTERPRISE]: { department: "CS" } } },
    { op: "replace", path: `${ENTERPRISE}:manager`, value: { value: "m-2" } }
  ))
  expect(ext.body[ENTERPRISE]).toEqual({ employeeNumber: "7", department: "CS", manager: { value: "m-2", displayName: "Babbage" } })
  const after = await d.send("GET", `/Users/${user.id}`)
  expect([after.body.name, after.body[ENTERPRISE], after.body.meta.version]).toEqual([
    { givenName: "Ada", familyName: "L", formatted: "A L" }, ext.body[ENTERPRISE], 'W/"6"'
  ])
  expect(await updatedEvents(d.developerId, user.id)).toEqual([["name"], ["name"], ["name"], ["name"], ["enterprise"]])
})

test("a PATCH that changes nothing stores nothing and announces nothing", async () => {
  const d = await scimClient(app)
  const user = await create(d, "same@example.com")
  const res = await d.send("PATCH", `/Users/${user.id}`, patch(
    { op: "Replace", path: 'emails[type eq "work"].value', value: "same@example.com" },
    { op: "replace", value: { name: { givenName: "Given" }, active: "True" } }
  ))
  expect([res.status, res.body.meta.version, res.body.meta.lastModified]).toEqual([200, 'W/"1"', user.meta.lastModified])
  expect(await updatedEvents(d.developerId, user.id)).toEqual([])
})

const versionOf = async (client: ScimClient, id: string) => (await client.send("GET", `/Users/${id}`)).headers.get("etag")

test("a user's ETag changes whenever their group memberships change (group POST, PATCH, PUT, DELETE)", async () => {
  const d = await scimClient(app)
  const [ann, bob] = [await create(d, "ann@example.com"), await create(d, "bob@example.com")]
  const group = await d.send("POST", "/Groups", { schemas: [GROUP], displayName: "Eng", members: [{ value: ann.id }] })
  expect(group.status).toBe(201)
  expect([await versionOf(d, ann.id), await versionOf(d, bob.id)]).toEqual(['W/"2"', 'W/"1"'])
  // a stale If-Match now fails: the user Entra read before is not the user now
  expect((await d.send("PATCH", `/Users/${ann.id}`, patch({ op: "replace", path: "displayName", value: "x" }), { "if-match": 'W/"1"' })).status).toBe(412)
  await d.send("PATCH", `/Groups/${group.body.id}`, patch({ op: "Add", path: "members", value: [{ value: bob.id }] }))
  expect([await versionOf(d, ann.id), await versionOf(d, bob.id)]).toEqual(['W/"2"', 'W/"2"'])
  await d.send("PATCH", `/Groups/${group.body.id}`, patch({ op: "Remove", path: `members[value eq "${ann.id}"]` }))
  expect([await versionOf(d, ann.id), await versionOf(d, bob.id)]).toEqual(['W/"3"', 'W/"2"'])
  // a rename alone changes no membership
  await d.send("PATCH", `/Groups/${group.body.id}`, patch({ op: "replace", path: "displayName", value: "Engineering" }))
  expect([await versionOf(d, ann.id), await versionOf(d, bob.id)]).toEqual(['W/"3"', 'W/"2"'])
  await d.send("PUT", `/Groups/${group.body.id}`, { schemas: [GROUP], displayName: "Engineering", members: [{ value: ann.id }] })
  expect([await versionOf(d, ann.id), await versionOf(d, bob.id)]).toEqual(['W/"4"', 'W/"3"'])
  expect((await d.send("DELETE", `/Groups/${group.body.id}`)).status).toBe(204)
  expect([await versionOf(d, ann.id), await versionOf(d, bob.id)]).toEqual(['W/"5"', 'W/"3"'])
  // what the GET shows is what is stored
  const rows = await app.query<{ id: string; version: number }>("SELECT id, version FROM scim_users WHERE id = ANY($1) ORDER BY user_name", [[ann.id, bob.id]])
  expect(rows.map((r) => r.version)).toEqual([5, 3])
})

test.skipIf(!usingRealPostgres)("group creation checks its members under lock: a user deleted meanwhile is refused, not made a member", async () => {
  const d = await scimClient(app)
  const user = await create(d, "leaving@example.com")
  const other = new pg.Client({ connectionString: app.databaseUrl })
  await other.connect()
  try {
    // another connection deletes the user and holds its transaction open while the group is created
    await other.query("BEGIN")
    await other.query("UPDATE scim_users SET deleted_at = now(), active = false WHERE id = $1", [user.id])
    const pending = d.send("POST", "/Groups", { schemas: [GROUP], displayName: "Late", members: [{ value: user.id }] })
    const waiting = async () => (await app.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"))[0].n > 0
    for (let i = 0; i < 80 && !(await waiting()); i++) await Bun.sleep(25)
    await other.query("COMMIT")
    const res = await pending
    expect([res.status, res.body.scimType]).toEqual([400, "invalidValue"])
  } finally {
    await other.end()
  }
  const members = await app.query("SELECT user_id FROM scim_group_members WHERE user_id = $1", [user.id])
  expect(members).toEqual([])
  expect(await app.query("SELECT id FROM scim_groups WHERE developer_id = $1", [d.developerId])).toEqual([])
})
