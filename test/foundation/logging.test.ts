/**
 * What the service logs about failed requests: a client's mistake is a debug line without a stack
 * (an operator's error log is for the service's own faults), and every line carries the request id.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"

let app: TestApp
const lines: Array<any> = []
const originalLog = console.log
beforeAll(async () => {
  // the JSON logger writes each line through console.log
  console.log = (...args: Array<unknown>) => {
    for (const arg of args) {
      try {
        lines.push(JSON.parse(String(arg)))
      } catch {
        lines.push({ raw: String(arg) })
      }
    }
  }
  app = await startTestApp({ env: { LOG_LEVEL: "debug" } })
})
afterAll(async () => {
  await app.stop()
  console.log = originalLog
})

const linesOf = (requestId: string) => lines.filter((l) => l.requestId === requestId)

test("a body that is not JSON: 400, one debug line naming the reason, nothing at ERROR, no stack", async () => {
  const res = await app.request("POST", "/v1/signup", { rawBody: "{not json", headers: { "x-request-id": "log-bad-json" } })
  expect(res.status).toBe(400)
  expect(res.body.code).toBe("BAD_REQUEST")
  const logged = linesOf("log-bad-json")
  expect(logged.map((l) => [l.level, l.message])).toContainEqual(["debug", "request rejected"])
  expect(logged.find((l) => l.message === "request rejected").reason).toBe("RequestError")
  expect(logged.filter((l) => l.level === "error")).toEqual([])
  expect(JSON.stringify(logged)).not.toContain("SyntaxError")
})

test("an unknown route: 404 and a debug line, nothing at ERROR", async () => {
  const res = await app.request("GET", "/v1/no-such-thing", { headers: { "x-request-id": "log-no-route" } })
  expect(res.status).toBe(404)
  const logged = linesOf("log-no-route")
  expect(logged.map((l) => [l.level, l.message])).toContainEqual(["debug", "request rejected"])
  expect(logged.filter((l) => l.level === "error")).toEqual([])
})

test("a persistent database without VAULT_ENCRYPTION_KEYS: one warning at the start that vault credentials will not outlive the process", () => {
  const warned = lines.filter((l) => l.level === "warn" && String(l.message).startsWith("VAULT_ENCRYPTION_KEYS is not set"))
  // embedded tests run on pglite://memory, whose data dies with the process like the key: no warning there
  expect(warned).toHaveLength(usingRealPostgres ? 1 : 0)
})
