/**
 * Shortcuts that set up state directly (no HTTP), for tests of capabilities that need an agent,
 * a grant or a grant token without going through the consent flow.
 */
import { Effect } from "effect"
import { Grants, type GrantRecord, type IssuedToken } from "../../src/grants/Service.ts"
import { newId } from "../../src/platform/Ids.ts"
import type { TestApp } from "./app.ts"

export const createAgent = async (
  app: TestApp,
  developerId: string,
  scopes: ReadonlyArray<string> = ["email:read", "calendar:read"],
  name = "Test agent"
): Promise<string> => {
  // made at the service's time (TestClock's in a TestClock app), never the database's real date:
  // a period's invoice counted an agent made "next year" under a run a year ahead
  const at = await app.now()
  const id = newId("ag", at)
  await app.query(
    `INSERT INTO agents (id, developer_id, name, description, scopes, status, created_at, updated_at)
     VALUES ($1, $2, $3, NULL, $4, 'active', $5, $5)`,
    [id, developerId, name, scopes, new Date(at)]
  )
  return id
}

/** A grant for the agent and principal, with a signed grant token. */
export const issueGrant = async (
  app: TestApp,
  input: {
    developerId: string
    agentId: string
    principalId?: string
    scopes: ReadonlyArray<string>
    expiresInSeconds?: number
  }
): Promise<{ grant: GrantRecord; token: IssuedToken }> =>
  app.run(Effect.gen(function*() {
    const grants = yield* Grants
    const now = Date.now()
    const grant = yield* grants.create({
      developerId: input.developerId,
      agentId: input.agentId,
      principalId: input.principalId ?? "user_1",
      scopes: input.scopes,
      expiresAt: new Date(now + (input.expiresInSeconds ?? 3600) * 1000),
      approvalMethod: "developer",
      policyId: null
    })
    const token = yield* grants.issueToken(grant)
    return { grant, token }
  }))
