/**
 * decisions §13: optional OPA over HTTP fails closed. A stand-in OPA on loopback answers as told:
 * true, false, undefined, or it hangs past OPA_TIMEOUT_MS, errors, answers garbage or is gone.
 * Every failure denies (403 POLICY_DENIED at authorize), is explained by evaluate, never a 5xx.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, createRule } from "./support.ts"

type Mode = "allow" | "deny" | "undefined" | "hang" | "error" | "garbage" | "not-boolean" | "huge"
let mode: Mode = "allow"
const seen: Array<any> = []
const opa = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: async (request) => {
    seen.push({ path: new URL(request.url).pathname, body: await request.json().catch(() => null) })
    switch (mode) {
      case "allow": return Response.json({ result: true })
      case "deny": return Response.json({ result: false })
      case "undefined": return Response.json({})
      case "hang": return new Promise<Response>((resolve) => setTimeout(() => resolve(Response.json({ result: true })), 30_000))
      case "error": return new Response("boom", { status: 500 })
      case "garbage": return new Response("<html>not json", { status: 200 })
      case "not-boolean": return Response.json({ result: "yes" })
      case "huge": return Response.json({ result: true, pad: "x".repeat(200_000) })
    }
  }
})

let app: TestApp
let apiKey: string
let agentId: string
beforeAll(async () => {
  app = await startTestApp({
    env: { RATE_LIMIT_SCALE: "1000", POLICY_BACKEND: "opa", OPA_URL: `http://127.0.0.1:${opa.port}`, OPA_TIMEOUT_MS: "300" }
  })
  const dev = await app.signup()
  apiKey = dev.apiKey
  agentId = await createAgent(app, dev.developerId, ["email:read"])
})
afterAll(async () => {
  await app?.stop()
  opa.stop(true)
})

describe("OPA", () => {
  test("true allows (auto-approves), false denies, undefined has no opinion; the input is the context", async () => {
    mode = "allow"
    const allowed = await authorize(app, apiKey, agentId, "user_1", ["email:read"])
    expect(allowed.status).toBe(201)
    expect(allowed.body).toMatchObject({ policyEnforced: true, policyId: "opa:agentauth/allow" })
    const last = seen[seen.length - 1]
    expect(last.path).toBe("/v1/data/agentauth/allow")
    expect(last.body.input).toMatchObject({ agentId, principalId: "user_1", scopes: ["email:read"], action: "authorize", principal: { active: true, groups: [] } })
    expect(last.body.input.time.iso).toMatch(/Z$/)
    mode = "deny"
    expect((await authorize(app, apiKey, agentId, "user_1", ["email:read"])).body.code).toBe("POLICY_DENIED")
    mode = "undefined"
    const pending = await authorize(app, apiKey, agentId, "user_1", ["email:read"])
    expect(pending.status).toBe(201)
    expect(pending.body.code).toBeUndefined()
  })

  test.each(["hang", "error", "garbage", "not-boolean", "huge"] as const)("OPA that answers %s denies, with a reason", async (m) => {
    mode = m
    const started = performance.now()
    const res = await authorize(app, apiKey, agentId, "user_1", ["email:read"])
    expect([res.status, res.body.code]).toEqual([403, "POLICY_DENIED"])
    // the timeout bounds the wait (300 ms), not the stand-in (30 s): wide apart, so a loaded machine cannot blur them
    expect(performance.now() - started).toBeLessThan(10_000)
    const explained = await app.request("POST", "/v1/policies/evaluate", { apiKey, body: { agentId, principalId: "u", scopes: ["email:read"] } })
    expect(explained.status).toBe(200)
    expect(explained.body.effect).toBe("deny")
    expect(explained.body.determiningPolicies).toContain("builtin:engine-failed")
    expect(explained.body.errors[0].message).toMatch(/OPA/)
  })

  test("a built-in deny still overrides an OPA allow", async () => {
    mode = "allow"
    await createRule(app, apiKey, { name: "no u9", effect: "deny", principalId: "u9" })
    expect((await authorize(app, apiKey, agentId, "u9", ["email:read"])).body.code).toBe("POLICY_DENIED")
  })

  test("without WEBHOOK_ALLOW_PRIVATE_HOSTS a loopback OPA is refused, which denies", async () => {
    const strict = await startTestApp({
      env: { POLICY_BACKEND: "opa", OPA_URL: `http://127.0.0.1:${opa.port}`, OPA_TIMEOUT_MS: "300", WEBHOOK_ALLOW_PRIVATE_HOSTS: "false" }
    })
    try {
      mode = "allow"
      const dev = await strict.signup()
      const before = seen.length
      const res = await strict.request("POST", "/v1/policies/evaluate", { apiKey: dev.apiKey, body: { agentId: "ag_x", principalId: "u", scopes: ["a"] } })
      expect(res.body.effect).toBe("deny")
      expect(seen.length).toBe(before)
    } finally {
      await strict.stop()
    }
  })

  test("OPA gone away denies", async () => {
    const gone = await startTestApp({ env: { POLICY_BACKEND: "opa", OPA_URL: "http://127.0.0.1:9", OPA_TIMEOUT_MS: "300" } })
    try {
      const dev = await gone.signup()
      const res = await gone.request("POST", "/v1/policies/evaluate", { apiKey: dev.apiKey, body: { agentId: "ag_x", principalId: "u", scopes: ["a"] } })
      expect([res.status, res.body.effect, res.body.errors[0]?.message]).toEqual([200, "deny", "OPA unreachable"])
    } finally {
      await gone.stop()
    }
  })
})
