/** Shared steps of the billing tests: a plans file, sandbox authorizations, code exchanges, refreshes. */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import type { TestApp } from "../support/app.ts"

/** writes a PLANS_FILE and returns its path */
export const plansFile = (plans: Record<string, unknown>): string => {
  const dir = mkdtempSync(join(tmpdir(), "plans-"))
  const path = join(dir, "plans.json")
  writeFileSync(path, JSON.stringify(plans))
  return path
}

export const freeWith = (limits: Record<string, number | null>) => ({
  free: { name: "Free", limits, monthlyFee: 0, currency: "USD" }
})

/** POST /v1/authorize for a sandbox developer: answers at once with a code */
export const authorize = (app: TestApp, apiKey: string, agentId: string) =>
  app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId: "user_1", scopes: ["email:read"] } })

export const exchange = (app: TestApp, apiKey: string, agentId: string, code: string) =>
  app.request("POST", "/v1/token", { apiKey, body: { code, agentId } })

export const refresh = (app: TestApp, apiKey: string, agentId: string, refreshToken: string) =>
  app.request("POST", "/v1/token/refresh", { apiKey, body: { refreshToken, agentId } })

export const count = async (app: TestApp, text: string, params: ReadonlyArray<unknown>) =>
  Number((await app.query<{ n: string | number }>(text, params))[0]!.n)
