/**
 * The README's verifier ("Verifiable credentials"), run as written: jose and the DID document alone
 * accept our credential, and refuse it once its grant is revoked. Its https fetches go to the app.
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { startTestApp, type TestApp } from "../support/app.ts"
import { sandbox } from "./support.ts"

let app: TestApp
const realFetch = globalThis.fetch

beforeAll(async () => {
  app = await startTestApp()
})
afterAll(async () => {
  globalThis.fetch = realFetch
  await app?.stop()
})

test("README: a verifier with jose and the DID document alone", async () => {
  const readme = readFileSync(join(import.meta.dir, "../../README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## Verifiable credentials"))
  const code = /```ts\n([\s\S]*?)```/.exec(section)![1]!
  const dir = join(import.meta.dir, "../../.scratch")
  mkdirSync(dir, { recursive: true })
  const file = join(dir, `readme-verifier-${Date.now()}.ts`)
  writeFileSync(file, code)
  const { verifyAgentCredential } = await import(file)
  rmSync(file)
  // did:web means https://<host>; here every URL the snippet fetches is answered by the test app
  globalThis.fetch = ((input: any, init?: any) => {
    const url = new URL(typeof input === "string" ? input : input.url)
    return realFetch(`${app.url}${url.pathname}${url.search}`, init)
  }) as typeof fetch
  const dev = await sandbox(app)
  const res = await dev.token({ credentialFormat: "vc-jwt" })
  const subject = await verifyAgentCredential(res.body.verifiableCredential)
  expect(subject).toMatchObject({ id: `did:service:${dev.agentId}`, principalId: "user_42", grantId: res.body.grantId })
  await app.request("DELETE", `/v1/grants/${res.body.grantId}`, { apiKey: dev.apiKey })
  await expect(verifyAgentCredential(res.body.verifiableCredential)).rejects.toThrow("credential revoked")
  const [h, p, s] = (res.body.verifiableCredential as string).split(".")
  await expect(verifyAgentCredential(`${h}.${p}.${s!.slice(0, -4)}AAAA`)).rejects.toThrow()
})
