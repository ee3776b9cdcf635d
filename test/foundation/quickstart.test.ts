/**
 * The README's quickstart, run as written: the shell block under "## Quickstart" is executed by
 * bash (curl and jq) against a fresh service, only BASE pointing at the test server. If the README
 * and the service drift apart, a newcomer's first paste fails, and so does this test.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { startTestApp, type TestApp } from "../support/app.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp()
})
afterAll(() => app.stop())

const quickstartScript = (): string => {
  const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8")
  const section = readme.split("\n## Quickstart\n")[1]
  if (section === undefined) throw new Error("README has no Quickstart section")
  const block = /```sh\n([\s\S]*?)```/.exec(section)
  if (block === null) throw new Error("the Quickstart section has no sh block")
  return block[1]!
}

test("the README quickstart runs as written and ends with a valid token", async () => {
  const script = quickstartScript()
  expect(script).toContain("BASE=http://localhost:3001")
  const runnable = script.replace("BASE=http://localhost:3001", `BASE=${app.url}`)
  const child = Bun.spawn(["bash", "-euo", "pipefail", "-c", runnable], { stdout: "pipe", stderr: "pipe" })
  const [stdout, stderr, code] = await Promise.all([
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
    child.exited
  ])
  expect(stderr).toBe("")
  expect(code).toBe(0)
  const lines = stdout.trim().split("\n")
  expect(lines[0]).toStartWith(`Send the person to: ${app.config.publicBaseUrl}/consent?req=areq_`)
  const verified = JSON.parse(lines.at(-1)!)
  expect(verified).toMatchObject({ valid: true, scopes: ["email:read"], principal: "user_42" })
  expect(verified.grantId).toStartWith("grnt_")
  // what the script did is stored: one developer, one agent, one active grant for the principal
  const grants = await app.query<{ status: string; principalId: string }>("SELECT status, principal_id FROM grants")
  expect(grants).toEqual([{ status: "active", principalId: "user_42" }])
})

test("sandbox mode, as the README says: authorize answers with the code at once", async () => {
  const { apiKey } = await app.signup({ mode: "sandbox" })
  const agent = await app.request("POST", "/v1/agents", { apiKey, body: { name: "a", scopes: ["email:read"] } })
  const auth = await app.request("POST", "/v1/authorize", {
    apiKey,
    body: { agentId: agent.body.agentId, principalId: "user_1", scopes: ["email:read"] }
  })
  expect(auth.status).toBe(201)
  expect(auth.body.sandbox).toBe(true)
  expect(typeof auth.body.code).toBe("string")
})
