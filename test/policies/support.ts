/** Shared by the policy tests: a stub directory (decisions §11 is built elsewhere) and small helpers. */
import { Effect, Layer } from "effect"
import { PolicyDirectory } from "../../src/policies/Ports.ts"
import type { TestApp } from "../support/app.ts"

/** Principals' groups and activity, as the directory would give them; a test writes the maps. */
export const makeDirectory = () => {
  const groups = new Map<string, ReadonlyArray<string>>()
  const inactive = new Set<string>()
  const layer = Layer.succeed(PolicyDirectory, {
    principal: (_developerId: string, principalId: string) =>
      Effect.succeed({ active: !inactive.has(principalId), groups: groups.get(principalId) ?? [], ssoVerified: false })
  })
  return { groups, inactive, layer }
}

export const b64 = (text: string) => Buffer.from(text, "utf8").toString("base64")

export const createRule = async (app: TestApp, apiKey: string, body: Record<string, unknown>) => {
  const res = await app.request("POST", "/v1/policies", { apiKey, body })
  if (res.status !== 201) throw new Error(`policy not created: ${res.status} ${res.text}`)
  return res.body as { id: string }
}

export const syncCedar = async (app: TestApp, apiKey: string, text: string, version = "1") => {
  const res = await app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version, content: b64(text) } })
  if (res.status !== 201) throw new Error(`set not stored: ${res.status} ${res.text}`)
  return res.body as { bundleId: string }
}

export const authorize = (app: TestApp, apiKey: string, agentId: string, principalId: string, scopes: ReadonlyArray<string>) =>
  app.request("POST", "/v1/authorize", { apiKey, body: { agentId, principalId, scopes } })
