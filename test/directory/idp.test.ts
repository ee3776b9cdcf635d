/**
 * Replays of what Okta and Microsoft Entra ID send (fixtures.ts), against the real service: every
 * step answers the status the provider expects, as application/scim+json, with the values it reads back.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { entraSequence, oktaSequence, type Step } from "./fixtures.ts"
import { SCIM, scimClient } from "./support.ts"

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

const replay = async (steps: ReadonlyArray<Step>) => {
  const client = await scimClient(app)
  const saved: Record<string, string> = {}
  for (const step of steps) {
    const path = fill(step.path, saved) as string
    const res = await client.send(step.method, path, step.body === undefined ? undefined : fill(step.body, saved))
    const context = `${step.name}: ${res.status} ${res.text}`
    expect(res.status, context).toBe(step.status)
    if (res.status !== 204 && res.status !== 304) expect(res.headers.get("content-type"), context).toStartWith(SCIM)
    for (const [key, expected] of Object.entries(step.expect ?? {})) expect(at(res.body, key), `${context}\n${key}`).toEqual(fill(expected, saved))
    for (const key of step.absent ?? []) expect(at(res.body, key), `${context}\n${key} absent`).toBeUndefined()
    for (const [name, from] of Object.entries(step.save ?? {})) saved[name] = at(res.body, from) as string
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
