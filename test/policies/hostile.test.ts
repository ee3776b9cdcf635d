/**
 * decisions §19 (revised), issue 32: no Cedar text one developer uploads can break policy handling
 * for another. Nesting and size are refused by a pre-scan before the engine sees the text; what
 * still makes the engine fail is refused alone, and the engine is re-created.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { parseSet } from "../../src/policies/Cedar.ts"
import { engineGeneration, initCedar, withEngine } from "../../src/policies/CedarEngine.ts"
import { scanCedar } from "../../src/policies/CedarScan.ts"
import { startTestApp, type TestApp } from "../support/app.ts"
import { createAgent } from "../support/fixtures.ts"
import { authorize, b64 } from "./support.ts"

let app: TestApp
beforeAll(async () => {
  app = await startTestApp({ env: { RATE_LIMIT_SCALE: "100" } })
  // the engine starts with the first set a process parses (issue 37); these tests also call it directly
  await initCedar()
})
afterAll(async () => {
  await app?.stop()
})

const sync = (apiKey: string, text: string) =>
  app.request("POST", "/v1/policies/sync", { apiKey, body: { format: "cedar", version: "1", content: b64(text) } })

const valid = `@id("reads") permit(principal, action == Action::"authorize", resource) when { ["email:read"].containsAll(context.scopes) };
@id("no-send") forbid(principal, action, resource) when { context.scopes.contains("email:send") };`
/** ~0.5 KiB: the wasm parser's recursion overflowed its stack and left the engine broken for the process */
const deep = `permit(principal, action, resource) when { ${"(".repeat(200)}true${")".repeat(200)} };`
/** no brackets, yet it overflows the engine's stack (in policyToJson) after ~0.5 s of work */
const longChain = `permit(principal, action, resource) when { ${Array(8000).fill("true").join(" && ")} };`
/** what the engine does with such text when nothing stops it before: a trap (~20 ms with the re-creation) */
const trap = () => withEngine((engine) => engine.policySetTextToParts(deep))

describe("the pre-scan", () => {
  test("200 nested brackets are 422 POLICY_INVALID before the engine, and the engine still serves valid sets", async () => {
    const { apiKey } = await app.signup()
    const res = await sync(apiKey, deep)
    expect(res.status).toBe(422)
    expect(res.body).toMatchObject({
      code: "POLICY_INVALID",
      message: "The Cedar policy set is not valid: policy 1 of the set nests (, [ and { deeper than 32 levels",
      details: [{ path: "content", message: "policy 1 of the set nests (, [ and { deeper than 32 levels" }]
    })
    expect((await sync(apiKey, valid)).status).toBe(201)
  })

  test("a policy over 64 KiB is 422 though the set is under 256 KiB; 32 levels and brackets in strings or comments pass", async () => {
    const { apiKey } = await app.signup()
    const big = `forbid(principal, action, resource) when { context.agentId == "${"x".repeat(70_000)}" };`
    const res = await sync(apiKey, `${valid}\n${big}`)
    expect([res.status, res.body.code, res.body.details]).toEqual([422, "POLICY_INVALID", [{
      path: "content",
      message: "policy 3 of the set is over 65536 bytes (at most 64 KiB per policy)"
    }]])
    const atLimit = `permit(principal, action, resource) when { ${"(".repeat(31)}true${")".repeat(31)} };`
    expect((await sync(apiKey, atLimit)).status).toBe(201)
    const quoted = `// (((((((((((((((((((((((((((((((((((((((((
permit(principal, action, resource) when { context.agentId == "\\"${"(".repeat(40)}" };`
    expect((await sync(apiKey, quoted)).status).toBe(201)
  })

  test("the scan counts brackets outside strings and comments, policy by policy", () => {
    expect(scanCedar(`permit(principal, action, resource) when { ${"[".repeat(33)} };`)?.message).toBe(
      "policy 1 of the set nests (, [ and { deeper than 32 levels"
    )
    expect(scanCedar(`permit(p, a, r) when { "${"{".repeat(100)}" }; // ${"(".repeat(100)}\n`)).toBeUndefined()
    expect(scanCedar(`a;b;${"{".repeat(33)}`)?.message).toBe("policy 3 of the set nests (, [ and { deeper than 32 levels")
  })
})

describe("an engine failure stays with its request", () => {
  test("a chain of 8,000 operators is 422 from the pre-scan; 256 pass", async () => {
    const { apiKey } = await app.signup()
    const before = engineGeneration()
    const res = await sync(apiKey, longChain)
    expect([res.status, res.body.code, res.body.details]).toEqual([422, "POLICY_INVALID", [{
      path: "content",
      message: "policy 1 of the set has more than 256 operators (&&, ||, comparisons, arithmetic, ., if)"
    }]])
    expect(engineGeneration()).toBe(before)
    expect((await sync(apiKey, `permit(principal, action, resource) when { ${Array(257).fill("true").join(" && ")} };`)).status).toBe(201)
  })

  test("a trap inside the engine is thrown to its caller alone; the engine is re-created and serves the next call", () => {
    const before = engineGeneration()
    expect(trap).toThrow("Out of bounds memory access")
    expect(engineGeneration()).toBe(before + 1)
    expect(parseSet(valid).ok).toBe(true)
    expect(engineGeneration()).toBe(before + 1)
  })

  test("hostile sets uploaded alongside another developer's authorizes leave every decision as it was", async () => {
    const other = await app.signup()
    const agentId = await createAgent(app, other.developerId, ["email:read", "email:send", "github:read"])
    expect((await sync(other.apiKey, valid)).status).toBe(201)
    const asks: Array<ReadonlyArray<string>> = [["email:read"], ["email:send"], ["github:read"]]
    const outcome = async () =>
      Promise.all(asks.map(async (scopes) => {
        const res = await authorize(app, other.apiKey, agentId, "user_1", scopes)
        // an auto-approval's code differs each time: whether there is one is the answer
        const code = res.status === 201 ? (typeof res.body.code === "string" ? "a code" : null) : res.body.code
        return [res.status, code, res.body.policyId ?? null, res.body.effect ?? null]
      }))
    const baseline = await outcome()
    expect(baseline).toEqual([
      [201, "a code", "reads", "allow"],
      [403, "POLICY_DENIED", null, null],
      [201, null, null, null]
    ])
    const attacker = await app.signup()
    const generation = engineGeneration()
    const hostile = Array.from({ length: 10 }, (_, i) => sync(attacker.apiKey, i % 2 === 0 ? deep : longChain))
    // and the engine broken for real between the decisions, as a failure the pre-scan missed would
    const traps = Array.from({ length: 5 }, () => new Promise<void>((resolve) => setTimeout(() => (expect(trap).toThrow(), resolve()), 0)))
    const during = Array.from({ length: 5 }, outcome)
    const [uploads, decisions] = await Promise.all([Promise.all(hostile), Promise.all(during), Promise.all(traps)])
    expect(uploads.map((r) => [r.status, r.body.code])).toEqual(Array(10).fill([422, "POLICY_INVALID"]))
    for (const d of decisions) expect(d).toEqual(baseline)
    // each trap replaced the engine: the other developer's set was pre-parsed again in the new one
    expect(engineGeneration()).toBe(generation + 5)
    expect(await outcome()).toEqual(baseline)
    expect(engineGeneration()).toBe(generation + 5)
    expect((await app.request("GET", "/v1/policies/bundles", { apiKey: attacker.apiKey })).body.bundles).toEqual([])
  })
})
