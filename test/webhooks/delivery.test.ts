/**
 * One delivery attempt on the wire: the connection pinned to the checked address with the
 * certificate verified for the host name, redirects not followed, the timeout, SSRF refusals at send.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { spawnSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { postPinned, send, signDelivery } from "../../src/webhooks/Delivery.ts"
import { requestPinned, resolvePublic } from "../../src/platform/Outbound.ts"
import { startReceiver } from "./support.ts"

const body = JSON.stringify({ id: "evt_1", type: "grant.created", createdAt: "2026-11-22T10:00:00.000Z", data: {} })
const headers = signDelivery("s".repeat(64), "evt_1", body, 1_800_000_000)

let dir: string
let cert: string
let tls: ReturnType<typeof Bun.serve>
const hits: Array<{ host: string | null; signature: string | null; body: string }> = []
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "whk-"))
  const made = spawnSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"),
    "-days", "1", "-subj", "/CN=hooks.test", "-addext", "subjectAltName=DNS:hooks.test"])
  if (made.status !== 0) throw new Error(`openssl failed: ${made.stderr}`)
  cert = readFileSync(join(dir, "cert.pem"), "utf8")
  tls = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    tls: { cert, key: readFileSync(join(dir, "key.pem"), "utf8") },
    fetch: async (r) => {
      hits.push({ host: r.headers.get("host"), signature: r.headers.get("x-service-signature"), body: await r.text() })
      const path = new URL(r.url).pathname
      if (path === "/moved") return new Response(null, { status: 301, headers: { location: "/in" } })
      if (path === "/token") return Response.json({ access_token: "fresh", pad: "x".repeat(Number(new URL(r.url).searchParams.get("pad") ?? 0)) })
      return new Response(null, { status: path === "/in" ? 202 : 404 })
    }
  })
})
afterAll(() => {
  tls.stop(true)
  rmSync(dir, { recursive: true, force: true })
})

describe("pinned TLS connection", () => {
  test("goes to the checked address for a host name that does not resolve, verifying the certificate for that name", async () => {
    hits.length = 0
    const outcome = await postPinned(new URL(`https://hooks.test:${tls.port}/in`), "127.0.0.1", body, headers, { timeoutMs: 5000, ca: cert })
    expect(outcome).toEqual({ ok: true, status: 202 })
    expect(hits).toEqual([{ host: `hooks.test:${tls.port}`, signature: headers["x-service-signature"], body }])
  })

  test("a certificate for another name is refused before anything is sent", async () => {
    hits.length = 0
    const outcome = await postPinned(new URL(`https://evil.test:${tls.port}/in`), "127.0.0.1", body, headers, { timeoutMs: 5000, ca: cert })
    expect(outcome.ok).toBe(false)
    expect(outcome.status).toBeNull()
    expect(hits).toEqual([])
  })

  test("a redirect is a failure and is not followed", async () => {
    hits.length = 0
    const outcome = await postPinned(new URL(`https://hooks.test:${tls.port}/moved`), "127.0.0.1", body, headers, { timeoutMs: 5000, ca: cert })
    expect(outcome).toEqual({ ok: false, status: 301, error: "receiver answered 301" })
    expect(hits).toHaveLength(1)
  })
})

describe("pinned request with an answer (the vault's upstream refresh)", () => {
  test("reads the answer's body up to the bound, and refuses a longer one", async () => {
    const headers = { "content-type": "application/x-www-form-urlencoded" }
    const answer = await requestPinned(new URL(`https://hooks.test:${tls.port}/token`), "127.0.0.1", "grant_type=refresh_token", headers, {
      timeoutMs: 5000, ca: cert, maxBodyBytes: 1024
    })
    expect(answer.status).toBe(200)
    expect(JSON.parse(answer.text).access_token).toBe("fresh")
    const tooLong = requestPinned(new URL(`https://hooks.test:${tls.port}/token?pad=5000`), "127.0.0.1", "", headers, {
      timeoutMs: 5000, ca: cert, maxBodyBytes: 1024
    })
    await expect(tooLong).rejects.toThrow()
  })
})

describe("send", () => {
  test("private hosts allowed (fetch): 3xx not followed, 2xx of any kind succeeds", async () => {
    const target = startReceiver(() => 200)
    const mover = startReceiver(() => new Response(null, { status: 307, headers: { location: target.url } }))
    const ok = startReceiver(() => 299)
    try {
      expect(await send(mover.url, body, headers, { timeoutMs: 5000, allowPrivateHosts: true })).toEqual({ ok: false, status: 307, error: "receiver answered 307" })
      expect(mover.received).toHaveLength(1)
      expect(target.received).toHaveLength(0)
      expect(await send(ok.url, body, headers, { timeoutMs: 5000, allowPrivateHosts: true })).toEqual({ ok: true, status: 299 })
    } finally {
      target.stop()
      mover.stop()
      ok.stop()
    }
  })

  test("a receiver that does not answer in time fails the attempt at the timeout", async () => {
    const slow = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => Bun.sleep(30_000).then(() => new Response("late")) })
    try {
      const started = performance.now()
      const outcome = await send(`http://127.0.0.1:${slow.port}/hook`, body, headers, { timeoutMs: 300, allowPrivateHosts: true })
      expect(outcome).toEqual({ ok: false, status: null, error: "timed out" })
      // the 300 ms timeout, not the receiver's 30 s, ends the wait (wide apart, for a loaded machine)
      expect(performance.now() - started).toBeLessThan(10_000)
    } finally {
      slow.stop(true)
    }
  })

  test("private hosts not allowed: http, loopback literals and names resolving to loopback are refused without a connection", async () => {
    const receiver = startReceiver()
    try {
      const port = new URL(receiver.url).port
      for (const [url, error] of [
        [receiver.url, "receiver url must use https"],
        [`https://127.0.0.1:${port}/hook`, "receiver not allowed or unreachable"],
        [`https://[::ffff:127.0.0.1]:${port}/hook`, "receiver not allowed or unreachable"],
        [`https://localhost:${port}/hook`, "receiver not allowed or unreachable"]
      ] as const) {
        expect([url, await send(url, body, headers, { timeoutMs: 2000, allowPrivateHosts: false })]).toEqual([url, { ok: false, status: null, error }])
      }
      expect(receiver.received).toHaveLength(0)
      // a private answer and no answer read the same (no DNS oracle)
      expect(await resolvePublic("localhost")).toEqual({ ok: false, reason: "receiver not allowed or unreachable" })
      expect(await resolvePublic("no-such-host.invalid")).toEqual({ ok: false, reason: "receiver not allowed or unreachable" })
      expect(await resolvePublic("8.8.8.8")).toEqual({ ok: true, address: "8.8.8.8", family: 4 })
    } finally {
      receiver.stop()
    }
  })
})
