/** SCIM test helpers: a developer with a SCIM token, requests sent the way identity providers send them. */
import { expect } from "bun:test"
import type { TestApp, TestResponse } from "../support/app.ts"

export const SCIM = "application/scim+json"
export const USER = "urn:ietf:params:scim:schemas:core:2.0:User"
export const GROUP = "urn:ietf:params:scim:schemas:core:2.0:Group"
export const ENTERPRISE = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
export const PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
export const ERROR = "urn:ietf:params:scim:api:messages:2.0:Error"

export interface ScimClient {
  readonly apiKey: string
  readonly developerId: string
  readonly token: string
  readonly send: (method: string, path: string, body?: unknown, headers?: Record<string, string>) => Promise<TestResponse<any>>
}

/** a developer with one SCIM token; `send` speaks application/scim+json like Okta and Entra ID */
export const scimClient = async (app: TestApp, plan: "free" | "pro" | "enterprise" = "enterprise"): Promise<ScimClient> => {
  const { apiKey, developerId } = await app.signup({ plan })
  const created = await app.request("POST", "/v1/scim/tokens", { apiKey, body: { label: "idp" } })
  if (created.status !== 201) throw new Error(`token: ${created.status} ${created.text}`)
  const token = created.body.token as string
  return {
    apiKey,
    developerId,
    token,
    send: (method, path, body, headers = {}) =>
      app.request<any>(method, `/scim/v2${path}`, {
        bearer: token,
        ...(body !== undefined ? { rawBody: JSON.stringify(body) } : {}),
        headers: { ...(body !== undefined ? { "content-type": `${SCIM}; charset=utf-8` } : {}), accept: SCIM, ...headers }
      })
  }
}

export const q = (filter: string) => encodeURIComponent(filter)

export const newUser = (userName: string, extra: Record<string, unknown> = {}) => ({
  schemas: [USER],
  userName,
  name: { givenName: "Given", familyName: "Family" },
  emails: [{ primary: true, value: userName, type: "work" }],
  active: true,
  ...extra
})

export const patch = (...Operations: Array<Record<string, unknown>>) => ({ schemas: [PATCH_OP], Operations })

/** a SCIM error body as RFC 7644 §3.12 shapes it */
export const scimError = (status: number, scimType?: string) => ({
  schemas: [ERROR],
  status: String(status),
  ...(scimType !== undefined ? { scimType } : {}),
  detail: expectAnyString
})
const expectAnyString = expect.any(String)
