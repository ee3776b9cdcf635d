/**
 * The inputs of scripts/bench/hostile.ts, shared by the bench and its sender process: hostile ones of
 * each kind (decisions §19, revised) and the ordinary inputs of the same kinds (the control).
 */
export const REDIRECT = "https://app.example.test/after-sso"

export const victimSet = `@id("reads") permit(principal, action == Action::"authorize", resource) when { ["email:read"].containsAll(context.scopes) };
@id("no-send") forbid(principal, action, resource) when { context.scopes.contains("email:send") };`
const deepCedar = `permit(principal, action, resource) when { ${"(".repeat(200)}true${")".repeat(200)} };`
const samlDeep = `${"<a>".repeat(90_000)}${"</a>".repeat(90_000)}`
const samlWide = `<a ${Array.from({ length: 40_000 }, (_, i) => `a${i}=""`).join(" ")}/>`
const responseWith = (extension: string) => Buffer.from(
  `<samlp:Response xmlns:samlp="urn:oasis:names:tc:SAML:2.0:protocol" ID="_x" Version="2.0"><samlp:Extensions>${extension}</samlp:Extensions></samlp:Response>`
).toString("base64")
const scimFilters = [`${"(".repeat(490)}userName eq "a"${")".repeat(490)}`, "(".repeat(999)]

/** What the sender needs to address the attacker's own routes. */
export interface Attacker {
  readonly url: string
  readonly apiKey: string
  readonly scimToken: string
  /** one RelayState per SAML input (sign-in starts, made by the bench beforehand) */
  readonly relayStates: ReadonlyArray<string>
}

export interface Send {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body?: string
}

const json = { "content-type": "application/json" }

/** 20 inputs of each kind, hostile or ordinary, as requests */
export const inputsOf = (kind: "cedar" | "saml" | "scim", hostile: boolean, attacker: Attacker): Array<Send> => {
  if (kind === "cedar") {
    const content = Buffer.from(hostile ? deepCedar : victimSet).toString("base64")
    const body = JSON.stringify({ format: "cedar", version: "x", content, activate: false })
    return Array.from({ length: 20 }, () => ({ method: "POST", path: "/v1/policies/sync", headers: { ...json, authorization: `Bearer ${attacker.apiKey}` }, body }))
  }
  if (kind === "saml") {
    const deep = hostile ? responseWith(samlDeep) : "", wide = hostile ? responseWith(samlWide) : "", plain = responseWith("<a/>")
    return attacker.relayStates.map((state, i) => ({
      method: "POST", path: "/sso/callback/saml", headers: json,
      body: JSON.stringify({ SAMLResponse: hostile ? (i % 2 === 0 ? deep : wide) : plain, RelayState: state })
    }))
  }
  return Array.from({ length: 20 }, (_, i) => ({
    method: "GET", path: `/scim/v2/Users?filter=${encodeURIComponent(hostile ? scimFilters[i % 2]! : 'userName eq "a"')}`,
    headers: { authorization: `Bearer ${attacker.scimToken}` }
  }))
}
