/**
 * Replays of what Okta and Microsoft Entra ID send (fixtures.ts), against the real service: every
 * step answers the status the provider expects, as application/scim+json, with the values it reads back.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { entraSequence, oktaSequence, type Step } from "./fixtures.ts"
import { ENTERPRISE, SCIM, type ScimClient, scimClient } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.stop())

const at = (body: unknown, path: string): unknown => {
  let value: any = body
  // an extension URN is one key (it contains dots)
  const urn = /^(urn:[^.]+(?:\.\d)*[^.]*?:User)\.(.*)$/.exec(path)
  const parts = urn ? [urn[1]!, ...urn[2]!.split(".")] : path.split(".")
  for (const part of parts) {
    if (value === undefined || value === null) return undefined
    value = part === "length" && Array.isArray(value) ? value.length : value[part]
  }
  return value
}

const fill = (value: unknown, saved: Record<string, string>): any =>
  JSON.parse(JSON.stringify(value ?? null).replace(/\{(\w+)\}|%7B(\w+)%7D/g, (m, a, b) => saved[a ?? b] ?? m))

interface Stored {
  readonly version: number
  readonly updates: number
}

/** a user as stored: its version and how many scim.user.updated events name it */
const stored = async (developerId: string, userId: string): Promise<Stored> => {
  const [row] = await app.query<{ version: number }>("SELECT version FROM scim_users WHERE id = $1", [userId])
  const [events] = await app.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM events WHERE developer_id = $1 AND type = 'scim.user.updated' AND data->>'scimUserId' = $2",
    [developerId, userId])
  return { version: Number(row?.version ?? 0), updates: Number(events!.n) }
}

/**
 * A step that answered a user (create, replace, patch) answered what is stored: a following GET
 * returns the same resource, the row holds the same values and version, and the version moved by
 * one, with one scim.user.updated, exactly when something changed.
 */
const checkUserWrite = async (client: ScimClient, step: Step, body: any, before: Stored | undefined, context: string) => {
  const get = await client.send("GET", `/Users/${body.id}`)
  expect(get.body, `${context}\nGET after`).toEqual(body)
  expect(get.headers.get("etag"), context).toBe(body.meta.version)
  const [row] = await app.query<any>(
    "SELECT user_name, external_id, display_name, active, resource FROM scim_users WHERE id = $1", [body.id])
  expect({
    userName: row.userName, externalId: row.externalId ?? undefined, displayName: row.displayName ?? undefined, active: row.active,
    name: row.resource.name, emails: row.resource.emails, phoneNumbers: row.resource.phoneNumbers, [ENTERPRISE]: row.resource[ENTERPRISE]
  }, `${context}\nstored`).toEqual({
    userName: body.userName, externalId: body.externalId, displayName: body.displayName, active: body.active,
    name: body.name, emails: body.emails, phoneNumbers: body.phoneNumbers, [ENTERPRISE]: body[ENTERPRISE]
  })
  const after = await stored(client.developerId, body.id)
  expect(`W/"${after.version}"`, `${context}\nstored version`).toBe(body.meta.version)
  if (before === undefined) expect([after.version, after.updates], context).toEqual([1, 0])
  else if (after.version === before.version) expect(after.updates, `${context}\nno change, no event`).toBe(before.updates)
  else expect([after.version, after.updates], `${context}\none change, one event`).toEqual([before.version + 1, before.updates + 1])
  if (step.method === "PATCH" || step.method === "PUT") expect(before, context).toBeDefined()
}

const replay = async (steps: ReadonlyArray<Step>) => {
  const client = await scimClient(app)
  const saved: Record<string, string> = {}
  for (const step of steps) {
    const path = fill(step.path, saved) as string
    const target = /^\/Users\/([^/?]+)$/.exec(path)?.[1]
    const before = step.method !== "GET" && target !== undefined ? await stored(client.developerId, target) : undefined
    const res = await client.send(step.method, path, step.body === undefined ? undefined : fill(step.body, saved))
    const context = `${step.name}: ${res.status} ${res.text}`
    expect(res.status, context).toBe(step.status)
    if (res.status !== 204 && res.status !== 304) expect(res.headers.get("content-type"), context).toStartWith(SCIM)
    for (const [key, expected] of Object.entries(step.expect ?? {})) expect(at(res.body, key), `${context}\n${key}`).toEqual(fill(expected, saved))
    for (const key of step.absent ?? []) expect(at(res.body, key), `${context}\n${key} absent`).toBeUndefined()
    for (const [name, from] of Object.entries(step.save ?? {})) saved[name] = at(res.body, from) as string
    if (step.method !== "GET" && res.status < 300 && res.body?.meta?.resourceType === "User") {
      await checkUserWrite(client, step, res.body, before, context)
    }
  }
  return { client, saved }
}

test("Okta's provisioning sequence: probe, search, create, PUT push, deactivate and reactivate by no-path PATCH, groups", async () => {
  const { client, saved } = await replay(oktaSequence)
  // what Okta sent and we do not store is not kept (password, locale)
  const [row] = await app.query("SELECT resource::text AS r FROM scim_users WHERE id = $1", [saved.userId])
  expect(row.r).not.toContain("1mz050nq")
  // events: provisioned, then updates, and one deprovisioning (the deactivation)
  const events = await app.query<{ type: string; data: any }>(
    "SELECT type, data FROM events WHERE developer_id = $1 AND type LIKE 'scim.%' ORDER BY id", [client.developerId])
  expect(events.map((e) => e.type)).toEqual([
    "scim.user.provisioned",
    "scim.user.updated",
    "scim.user.updated",
    "scim.user.deprovisioned",
    "scim.user.updated",
    "scim.group.updated",
    "scim.group.updated",
    "scim.group.updated",
    "scim.group.updated"
  ])
  expect(events[0]!.data).toEqual({ scimUserId: saved.userId, principalId: "dade.murphy@example.com" })
  expect(events[1]!.data).toEqual({ scimUserId: saved.userId, changedAttributes: ["displayName", "name"] })
  // ids only: no email, name or userName in any payload but the principal id
  for (const e of events.slice(1)) expect(JSON.stringify(e.data)).not.toContain("Dade")
})

test("Entra ID's provisioning sequence: capitalised ops, string booleans, filtered paths, manager, externalId, excludedAttributes", async () => {
  await replay(entraSequence)
})
