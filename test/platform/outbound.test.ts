/**
 * The outbound fetch other capabilities hand to libraries (SSO providers, channels): the rules of
 * decisions §7 apply whatever the caller is, and answers are bounded and time-limited.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { pinnedFetch } from "../../src/platform/Outbound.ts"

let server: ReturnType<typeof Bun.serve>
let base: string
beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (r) => {
      const path = new URL(r.url).pathname
      if (path === "/moved") return new Response(null, { status: 302, headers: { location: "/json" } })
      if (path === "/big") return new Response("x".repeat(10_000))
      if (path === "/slow") return new Promise<Response>((resolve) => setTimeout(() => resolve(new Response("late")), 2_000))
      if (path === "/echo") return Response.json({ method: r.method, body: await r.text(), type: r.headers.get("content-type") })
      return Response.json({ ok: true }, { headers: { "x-extra": "1" } })
    }
  })
  base = `http://127.0.0.1:${server.port}`
})
afterAll(() => server.stop(true))

describe("pinnedFetch", () => {
  const allowed = pinnedFetch({ allowPrivateHosts: true, timeoutMs: 500, maxBodyBytes: 1_000 })
  const strict = pinnedFetch({ allowPrivateHosts: false, timeoutMs: 500, maxBodyBytes: 1_000 })

  test("with private hosts allowed: GET and POST reach the server, headers come back", async () => {
    const got = await allowed(`${base}/json`)
    expect(got.status).toBe(200)
    expect(got.headers.get("x-extra")).toBe("1")
    expect(await got.json()).toEqual({ ok: true })
    const posted = await allowed(`${base}/echo`, { method: "POST", body: new URLSearchParams({ a: "1" }), headers: { "content-type": "application/x-www-form-urlencoded" } })
    expect(await posted.json()).toEqual({ method: "POST", body: "a=1", type: "application/x-www-form-urlencoded" })
  })

  test("redirects are answered, not followed; oversized and slow answers are refused", async () => {
    const moved = await allowed(`${base}/moved`)
    expect(moved.status).toBe(302)
    await expect(allowed(`${base}/big`)).rejects.toThrow("answer too large")
    await expect(allowed(`${base}/slow`)).rejects.toThrow()
  })

  test("by default: plain http, loopback and names that resolve privately are refused with one text", async () => {
    await expect(strict(`${base}/json`)).rejects.toThrow("url must use https")
    await expect(strict(`https://127.0.0.1:${server.port}/json`)).rejects.toThrow("receiver not allowed or unreachable")
    await expect(strict(`https://localhost:${server.port}/json`)).rejects.toThrow("receiver not allowed or unreachable")
    await expect(strict(`https://no-such-host.invalid/json`)).rejects.toThrow("receiver not allowed or unreachable")
    await expect(strict(`${base}/json`, { method: "DELETE" })).rejects.toThrow("method DELETE not allowed")
  })
})
