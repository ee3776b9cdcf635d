/**
 * The OAuth server across two instances on one PostgreSQL and one Redis (decisions §22.9: state lives
 * only in the database): every step of one authorization lands on a different instance than the one
 * before it, as behind a load balancer, and what one instance revokes the other refuses at once.
 * Real mode only (the embedded database is one process's).
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import * as jose from "jose"
import { startTestApp, type TestApp, usingRealPostgres } from "../support/app.ts"
import { form, pkce, postForm, registerClient, registerServer } from "./support.ts"

let one: TestApp
let two: TestApp
let dev: { apiKey: string; developerId: string }
let rs: any
let client: any

beforeAll(async () => {
  if (!usingRealPostgres) return
  const env = { RATE_LIMIT_SCALE: "100" }
  one = await startTestApp({ env })
  two = await startTestApp({ env, databaseUrl: one.databaseUrl, redisKeyPrefix: one.config.redisKeyPrefix })
  dev = await one.signup({ plan: "enterprise" })
  rs = await registerServer(one, dev.apiKey)
  client = await registerClient(two, dev.developerId)
}, 120_000)
afterAll(async () => {
  if (!usingRealPostgres) return
  await two?.server.stop()
  await one?.stop()
})

const local = (url: string) => new URL(url).pathname + new URL(url).search
const callback = "http://127.0.0.1:7777/callback"

/** /authorize on `start`, the sign-in and consent on `other`, back to `start` for nothing: the code it answers */
const authorizeAcross = async (start: TestApp, other: TestApp) => {
  const { challenge, verifier } = pkce()
  const query = new URLSearchParams({
    response_type: "code", client_id: client.client_id, redirect_uri: callback, code_challenge: challenge, code_challenge_method: "S256",
    state: "across", resource: rs.identifier, scope: "notes:read notes:write"
  })
  const started = await start.request("GET", `/oauth/${dev.developerId}/authorize?${query}`)
  expect(started.status).toBe(303)
  const cookie = started.headers.get("set-cookie")!.split(";")[0]!
  const login = await other.request("GET", local(started.headers.get("location")!), { headers: { cookie } })
  expect(login.status).toBe(303)
  const interaction = new URL(login.headers.get("location")!).searchParams.get("interaction")!
  const signedIn = await start.request("POST", `/v1/oauth/interactions/${interaction}/principal`, { apiKey: dev.apiKey, body: { principalId: "person-1" } })
  expect(signedIn.status).toBe(201)
  const resumed = await other.request("GET", local(signedIn.body.redirectTo), { headers: { cookie } })
  expect(resumed.headers.get("location")).toContain("/consent?")
  const page = await start.request("GET", local(resumed.headers.get("location")!), { headers: { cookie } })
  expect(page.status).toBe(200)
  const decided = await other.request("POST", "/consent/approve", {
    rawBody: form({ req: interaction }), headers: { "content-type": "application/x-www-form-urlencoded", cookie }
  })
  expect(decided.status).toBe(303)
  const back = new URL(decided.headers.get("location")!)
  expect(back.searchParams.get("state")).toBe("across")
  return { code: back.searchParams.get("code")!, verifier }
}

const exchange = (app: TestApp, code: string, verifier: string) =>
  postForm(app, `/oauth/${dev.developerId}/token`, {
    grant_type: "authorization_code", code, code_verifier: verifier, client_id: client.client_id, redirect_uri: callback, resource: rs.identifier
  })
const refresh = (app: TestApp, token: string) =>
  postForm(app, `/oauth/${dev.developerId}/token`, { grant_type: "refresh_token", refresh_token: token, client_id: client.client_id, resource: rs.identifier })
const introspect = (app: TestApp, token: string) =>
  postForm(app, `/oauth/${dev.developerId}/introspect`, { token }, { authorization: `Basic ${btoa(`${rs.resourceServerId}:${rs.introspection.clientSecret}`)}` })

test.skipIf(!usingRealPostgres)("one authorization whose every step changes instance: code, refresh, introspection, revocation", async () => {
  const { code, verifier } = await authorizeAcross(one, two)
  const issued = await exchange(one, code, verifier)
  expect(issued.status).toBe(200)
  expect(issued.body.scope).toBe("notes:read notes:write")
  // the code is used up for both instances
  const again = await exchange(two, code, verifier)
  expect(again.body.error).toBe("invalid_grant")
  // (that replay revoked the grant: a second authorization carries on)
  const second = await authorizeAcross(two, one)
  const tokens = (await exchange(one, second.code, second.verifier)).body
  const refreshed = await refresh(two, tokens.refresh_token)
  expect(refreshed.status).toBe(200)
  expect(refreshed.body.refresh_token).not.toBe(tokens.refresh_token)
  // both instances sign with the one key: either verifies what the other issued
  const jwks = jose.createLocalJWKSet((await two.request("GET", "/.well-known/jwks.json")).body)
  const { payload } = await jose.jwtVerify(refreshed.body.access_token, jwks, {
    issuer: `${one.config.oauth.issuerBase}/oauth/${dev.developerId}`, audience: rs.identifier, typ: "at+jwt"
  })
  expect(payload.client_id).toBe(client.client_id)
  expect((await introspect(one, refreshed.body.access_token)).body).toMatchObject({ active: true, scope: "notes:read notes:write", sub: "person-1" })
  // an access token revoked on one instance is inactive on the other at once
  const revokedAccess = await postForm(one, `/oauth/${dev.developerId}/revoke`, { token: refreshed.body.access_token, client_id: client.client_id })
  expect(revokedAccess.status).toBe(200)
  expect((await introspect(two, refreshed.body.access_token)).body).toEqual({ active: false })
  // the refresh token revoked on the second instance ends the grant everywhere
  const next = (await refresh(one, refreshed.body.refresh_token)).body
  expect((await introspect(one, next.access_token)).body.active).toBe(true)
  expect((await postForm(two, `/oauth/${dev.developerId}/revoke`, { token: next.refresh_token, client_id: client.client_id })).status).toBe(200)
  expect((await introspect(one, next.access_token)).body).toEqual({ active: false })
  const afterRevoke = await refresh(one, next.refresh_token)
  expect(afterRevoke.status).toBe(400)
  expect(afterRevoke.body.error).toBe("invalid_grant")
  const [grant] = await one.query("SELECT status FROM grants WHERE id = $1", [payload.grnt])
  expect(grant.status).toBe("revoked")
}, 60_000)

test.skipIf(!usingRealPostgres)("a refresh token replayed on the other instance revokes the grant, whichever instance sees the replay", async () => {
  const { code, verifier } = await authorizeAcross(one, two)
  const tokens = (await exchange(two, code, verifier)).body
  const rotated = await refresh(one, tokens.refresh_token)
  expect(rotated.status).toBe(200)
  // the same refresh token, presented at the other instance
  const replayed = await refresh(two, tokens.refresh_token)
  expect(replayed.status).toBe(400)
  expect(replayed.body.error).toBe("invalid_grant")
  expect(replayed.body.error_description).toContain("already used")
  // the rotated one, and its access token, are dead on both
  expect((await refresh(one, rotated.body.refresh_token)).body.error).toBe("invalid_grant")
  expect((await introspect(one, rotated.body.access_token)).body).toEqual({ active: false })
  expect((await introspect(two, rotated.body.access_token)).body).toEqual({ active: false })
  const grantId = jose.decodeJwt(rotated.body.access_token).grnt as string
  expect(await one.query("SELECT status FROM grants WHERE id = $1", [grantId])).toEqual([{ status: "revoked" }])
  const revokedEvents = await one.query("SELECT count(*)::int AS n FROM events WHERE type = 'grant.revoked' AND data->>'grantId' = $1", [grantId])
  expect(revokedEvents[0].n).toBe(1)
  // two replays at once, one per instance: still one revocation
  const fresh = await authorizeAcross(two, one)
  const t = (await exchange(one, fresh.code, fresh.verifier)).body
  const [a, b] = await Promise.all([refresh(one, t.refresh_token), refresh(two, t.refresh_token)])
  expect([a.status, b.status].sort()).toEqual([200, 400])
  const [c, d] = await Promise.all([refresh(one, t.refresh_token), refresh(two, t.refresh_token)])
  expect([c.body.error, d.body.error]).toEqual(["invalid_grant", "invalid_grant"])
  const freshGrant = jose.decodeJwt(t.access_token).grnt as string
  expect(await one.query("SELECT status FROM grants WHERE id = $1", [freshGrant])).toEqual([{ status: "revoked" }])
  const events = await one.query("SELECT count(*)::int AS n FROM events WHERE type = 'grant.revoked' AND data->>'grantId' = $1", [freshGrant])
  expect(events[0].n).toBe(1)
}, 60_000)
