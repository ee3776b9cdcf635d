/**
 * Stock resource-server middleware accepts our access tokens unchanged (decisions §22.7):
 * express-oauth2-jwt-bearer with `issuerBaseURL` = the developer's issuer, `audience` = the
 * resource server's identifier and `strict: true` (RFC 9068: typ at+jwt, iat, sub, client_id, jti),
 * discovering our RFC 8414 metadata and JWKS itself. A token for another resource server, or a
 * section-3 grant token, is refused. The same with jose, configured as §22.7 writes it (issuer,
 * audience, typ at+jwt, RS256, the RFC 9068 claims) from the JWKS the metadata publishes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
// @ts-ignore express ships no types of its own (installed as express-oauth2-jwt-bearer's peer)
import express from "express"
import { auth } from "express-oauth2-jwt-bearer"
import * as jose from "jose"
import type { Server } from "node:http"
import { startTestApp, type TestApp } from "../support/app.ts"
import { freePort } from "../support/net.ts"
import { authorizeThroughConsent, postForm, registerClient, registerServer } from "./support.ts"

let app: TestApp
let api: Server
let apiUrl: string
let dev: { apiKey: string; developerId: string }
let client: any

const tokenFor = async (resource: string) => {
  const flow = await authorizeThroughConsent(app, { apiKey: dev.apiKey, developerId: dev.developerId, clientId: client.client_id, resource })
  const answer = await postForm(app, `/oauth/${dev.developerId}/token`, {
    grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, client_id: client.client_id,
    redirect_uri: "http://127.0.0.1:7777/callback", resource
  })
  return answer.body.access_token as string
}

/** a section-3 grant token (typ JWT, iss JWT_ISSUER) for the same person and audience */
const sectionThreeToken = async () => {
  const agent = (await app.request("POST", "/v1/agents", { apiKey: dev.apiKey, body: { name: "Plain", scopes: ["notes:read"] } })).body
  const authz = (await app.request("POST", "/v1/authorize", { apiKey: dev.apiKey, body: { agentId: agent.agentId, principalId: "person-1", scopes: ["notes:read"], audience: "https://notes.example/api" } })).body
  const code = (await app.request("POST", `/v1/consent/${authz.authRequestId}/approve`)).body.code
  return (await app.request("POST", "/v1/token", { apiKey: dev.apiKey, body: { code, agentId: agent.agentId } })).body.grantToken as string
}

beforeAll(async () => {
  const port = await freePort()
  app = await startTestApp({ env: { PORT: String(port), PUBLIC_BASE_URL: `http://127.0.0.1:${port}`, RATE_LIMIT_SCALE: "100" } })
  dev = await app.signup({ plan: "enterprise" })
  await registerServer(app, dev.apiKey, { identifier: "https://notes.example/api" })
  await registerServer(app, dev.apiKey, { identifier: "https://calendar.example/api" })
  client = await registerClient(app, dev.developerId)
  const server = express()
  server.use(auth({ issuerBaseURL: `${app.config.publicBaseUrl}/oauth/${dev.developerId}`, audience: "https://notes.example/api", strict: true }))
  server.get("/notes", (req: any, res: any) => {
    res.json({ sub: req.auth?.payload.sub, scope: req.auth?.payload.scope, clientId: req.auth?.payload.client_id })
  })
  await new Promise<void>((resolve) => {
    api = server.listen(0, "127.0.0.1", () => resolve())
  })
  const address = api.address()
  apiUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`
}, 120_000)
afterAll(async () => {
  api?.close()
  await app?.stop()
})

describe("express-oauth2-jwt-bearer, strict", () => {
  test("our token for its audience passes; another audience's and a section-3 grant token do not", async () => {
    const token = await tokenFor("https://notes.example/api")
    const ok = await fetch(`${apiUrl}/notes`, { headers: { authorization: `Bearer ${token}` } })
    expect(ok.status).toBe(200)
    expect(await ok.json()).toEqual({ sub: "person-1", scope: "notes:read", clientId: client.client_id })
    const other = await tokenFor("https://calendar.example/api")
    expect((await fetch(`${apiUrl}/notes`, { headers: { authorization: `Bearer ${other}` } })).status).toBe(401)
    const grantToken = await sectionThreeToken()
    expect((await fetch(`${apiUrl}/notes`, { headers: { authorization: `Bearer ${grantToken}` } })).status).toBe(401)
  })
})

describe("jose jwtVerify with the published JWKS", () => {
  test("issuer, audience and typ checks: ours for its resource passes; another resource's, a section-3 token and another issuer's do not", async () => {
    const issuer = `${app.config.publicBaseUrl}/oauth/${dev.developerId}`
    // discovered as a resource server would: the RFC 8414 document names the JWKS
    const metadata = await (await fetch(`${app.config.publicBaseUrl}/.well-known/oauth-authorization-server/oauth/${dev.developerId}`)).json()
    expect(metadata.issuer).toBe(issuer)
    const jwks = jose.createRemoteJWKSet(new URL(metadata.jwks_uri))
    const options = {
      issuer, audience: "https://notes.example/api", typ: "at+jwt", algorithms: ["RS256"], requiredClaims: ["client_id", "scope", "sub", "jti", "iat"]
    }
    const { payload, protectedHeader } = await jose.jwtVerify(await tokenFor("https://notes.example/api"), jwks, options)
    expect(protectedHeader).toMatchObject({ alg: "RS256", typ: "at+jwt" })
    expect(payload).toMatchObject({ iss: issuer, aud: "https://notes.example/api", sub: "person-1", scope: "notes:read", client_id: client.client_id })
    const refusal = (token: string) => jose.jwtVerify(token, jwks, options).then(() => "accepted", (e: any) => `${e.code}: ${e.claim ?? ""}`)
    expect(await refusal(await tokenFor("https://calendar.example/api"))).toBe("ERR_JWT_CLAIM_VALIDATION_FAILED: aud")
    // a section-3 grant token: signed with the same key, so only typ and iss tell it apart
    expect(await refusal(await sectionThreeToken())).toBe("ERR_JWT_CLAIM_VALIDATION_FAILED: typ")
    expect(await jose.jwtVerify(await sectionThreeToken(), jwks, { ...options, typ: undefined, requiredClaims: [] }).then(() => "accepted", (e: any) => e.claim)).toBe("iss")
    // another developer's token for a server of the same name space: another issuer
    const other = await app.signup({ plan: "enterprise" })
    await registerServer(app, other.apiKey, { identifier: "https://other-notes.example/api" })
    const otherClient = await registerClient(app, other.developerId)
    const flow = await authorizeThroughConsent(app, { apiKey: other.apiKey, developerId: other.developerId, clientId: otherClient.client_id })
    const foreign = (await postForm(app, `/oauth/${other.developerId}/token`, {
      grant_type: "authorization_code", code: flow.back!.searchParams.get("code")!, code_verifier: flow.verifier, client_id: otherClient.client_id,
      redirect_uri: "http://127.0.0.1:7777/callback"
    })).body.access_token
    expect(await jose.jwtVerify(foreign, jwks, { ...options, audience: "https://other-notes.example/api" }).then(() => "accepted", (e: any) => e.claim)).toBe("iss")
  })
})
