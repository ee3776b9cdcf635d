/**
 * Optional OPA over HTTP (decisions §13): `POST <OPA_URL>/v1/data/agentauth/allow` with the context
 * as `input`. `{"result": true}` allows, `{"result": false}` denies, no `result` (the rule is
 * undefined) has no opinion; a timeout, a network error, a non-2xx answer or anything else fails
 * closed (deny). Outbound through the webhook machinery: https to a public address, pinned, with a
 * bounded answer; plain fetch (loopback allowed) only with WEBHOOK_ALLOW_PRIVATE_HOSTS=true.
 */
import { requestPinned, resolvePublic } from "../platform/Outbound.ts"
import type { EngineResult, PolicyContext } from "./Rules.ts"

export const OPA_POLICY_ID = "opa:agentauth/allow"
const MAX_ANSWER_BYTES = 64 * 1024

const failed = (message: string): EngineResult => ({ denies: [], allows: [], errors: [{ policyId: OPA_POLICY_ID, message }], failed: true })

const post = async (url: URL, body: string, timeoutMs: number, allowPrivateHosts: boolean): Promise<{ status: number; text: string }> => {
  const signal = AbortSignal.timeout(timeoutMs)
  const headers = { "content-type": "application/json", accept: "application/json" }
  if (allowPrivateHosts) {
    const response = await fetch(url, { method: "POST", headers, body, redirect: "manual", signal })
    const bytes = new Uint8Array(await response.arrayBuffer())
    if (bytes.length > MAX_ANSWER_BYTES) throw new Error("answer too large")
    return { status: response.status, text: new TextDecoder().decode(bytes) }
  }
  if (url.protocol !== "https:") throw new Error("OPA_URL must use https")
  const timedOut = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(new Error("timed out")), { once: true }))
  const resolved = await Promise.race([resolvePublic(url.hostname), timedOut])
  if (!resolved.ok) throw new Error(resolved.reason)
  return Promise.race([requestPinned(url, resolved.address, body, headers, { timeoutMs, signal, maxBodyBytes: MAX_ANSWER_BYTES }), timedOut])
}

export const evaluateOpa = async (
  opaUrl: string,
  ctx: PolicyContext,
  options: { timeoutMs: number; allowPrivateHosts: boolean }
): Promise<EngineResult> => {
  let url: URL
  try {
    url = new URL(`${opaUrl.replace(/\/+$/, "")}/v1/data/agentauth/allow`)
  } catch {
    return failed("OPA_URL is not a valid URL")
  }
  let answer: { status: number; text: string }
  try {
    answer = await post(url, JSON.stringify({ input: ctx }), options.timeoutMs, options.allowPrivateHosts)
  } catch (e) {
    const name = (e as { name?: string }).name
    return failed(name === "TimeoutError" || name === "AbortError" || String(e).includes("timed out") ? "OPA timed out" : "OPA unreachable")
  }
  if (answer.status < 200 || answer.status >= 300) return failed(`OPA answered ${answer.status}`)
  let parsed: unknown
  try {
    parsed = JSON.parse(answer.text)
  } catch {
    return failed("OPA answered something that is not JSON")
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return failed("OPA answered an unexpected document")
  if (!("result" in parsed)) return { denies: [], allows: [], errors: [] }
  const result = (parsed as { result: unknown }).result
  if (result === true) return { denies: [], allows: [OPA_POLICY_ID], errors: [] }
  if (result === false) return { denies: [OPA_POLICY_ID], allows: [], errors: [] }
  return failed("OPA's result is not a boolean")
}
