/**
 * The README's quickstart, run as written: the shell block under "## Quickstart" is executed by
 * bash (curl and jq) against a fresh service, only BASE pointing at the test server. If the README
 * and the service drift apart, a newcomer's first paste fails, and so does this test.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"

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

test("GET / points a newcomer to the docs", async () => {
  const root = await app.request("GET", "/")
  expect(root.status).toBe(200)
  expect(root.body).toMatchObject({ name: "agent-auth-service", docs: "/docs", openapi: "/openapi.json", health: "/health" })
  expect((await app.request("GET", root.body.docs)).status).toBe(200)
})

test("npm run dev prints the base URL, the docs URL and the command that signs up a developer", async () => {
  const dir = (await import("node:fs")).mkdtempSync(`${(await import("node:os")).tmpdir()}/aas-dev-`)
  // a port the system just handed out (a random one met another test's listener under load)
  const port = String(await freePort())
  const child = Bun.spawn([process.execPath, new URL("../../src/main.ts", import.meta.url).pathname, "dev"], {
    cwd: dir,
    env: { PATH: process.env.PATH ?? "", PORT: port, LOG_LEVEL: "warn" },
    stdout: "pipe",
    stderr: "pipe"
  })
  try {
    const reader = child.stdout.getReader()
    let out = ""
    const deadline = Date.now() + 60_000
    while (!out.includes("Sign up") || !out.includes("Authorization: Bearer")) {
      if (Date.now() > deadline) throw new Error(`no banner: ${out}`)
      const { done, value } = await reader.read()
      if (done) throw new Error(`dev exited ${await child.exited}: ${out} ${await new Response(child.stderr).text()}`)
      out += new TextDecoder().decode(value)
    }
    const base = `http://localhost:${port}`
    expect(out).toContain(`API   ${base}`)
    expect(out).toContain(`Docs  ${base}/docs`)
    const signup = /curl -sS -X POST .*$/m.exec(out)![0]
    // the printed command works as printed
    const run = Bun.spawnSync(["bash", "-c", signup])
    expect(JSON.parse(run.stdout.toString()).apiKey).toStartWith("sk_")
  } finally {
    child.kill()
    await child.exited
    ;(await import("node:fs")).rmSync(dir, { recursive: true, force: true })
  }
}, 90_000)
