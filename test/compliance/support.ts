/** Shared set-up for the compliance tests: a developer with chained audit entries and grants. */
import { Effect } from "effect"
import { AuditChain, type AppendInput } from "../../src/platform/AuditChain.ts"
import type { TestApp } from "../support/app.ts"

/** appends `n` entries to the developer's chain in batches (the chain's own writer, so hashes are real) */
export const seedAudit = async (app: TestApp, developerId: string, n: number, make?: (i: number) => Partial<AppendInput>) => {
  const batch = 5000
  for (let start = 0; start < n; start += batch) {
    const inputs: Array<AppendInput> = []
    for (let i = start; i < Math.min(n, start + batch); i++) {
      inputs.push({
        developerId,
        action: i % 3 === 0 ? "email.read" : "calendar.write",
        agentId: `ag_${i % 7}`,
        agentDid: `did:service:ag_${i % 7}`,
        grantId: i % 5 === 0 ? null : `grnt_${i % 11}`,
        principalId: `user_${i % 13}`,
        metadata: { i, note: i % 17 === 0 ? "comma, \"quote\"\nnewline #hash" : "plain", nested: { z: 1, a: [i, null] } },
        status: i % 10 === 0 ? "failure" : "success",
        ...make?.(i)
      })
    }
    await app.run(Effect.flatMap(AuditChain, (c) => c.appendMany(inputs)))
  }
}

export const jwksOf = async (app: TestApp) => (await app.request("GET", "/.well-known/jwks.json")).body

export const download = async (app: TestApp, apiKey: string, path: string) => {
  const res = await fetch(app.url + path, { headers: { authorization: `Bearer ${apiKey}` } })
  return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) }
}
