import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { Gate } from "../gate/Gate.ts"
import { Grants } from "../grants/Service.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, NotFound } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { Keys } from "../platform/Keys.ts"
import { pageParams, toPage } from "../platform/Pagination.ts"
import { nowMillis } from "../platform/Time.ts"
import { agentAuthContext, agentGrantTypeMetadata, didDocument } from "./Did.ts"
import { holderJwkOf } from "./Formats.ts"
import { VcKeys } from "./Keys.ts"
import type { ListForm } from "./Lists.ts"
import { makeRepo } from "./Repo.ts"
import { credentialView, Credentials } from "./Service.ts"
import { LIST_TTL_SECONDS } from "./StatusList.ts"
import { makeVerifier, type Outcome } from "./Verify.ts"

/** which form of a status list the Accept header asks for (the VC-JOSE credential by default) */
const formFor = (accept: string | undefined): ListForm => {
  const a = (accept ?? "").toLowerCase()
  if (a.includes("application/statuslist+jwt")) return "tokenList"
  if (a.includes("application/vc+jwt")) return "vc"
  if (a.includes("application/json")) return "json"
  return "vc"
}

/** previous keys are published while a credential they signed is unexpired: looked up at most once a minute */
const LIVE_KEYS_MS = 60_000

export const CredentialsHttp = HttpApiBuilder.group(Api, "credentials", (handlers) =>
  Effect.gen(function*() {
    const credentials = yield* Credentials
    const grants = yield* Grants
    const gate = yield* Gate
    const keys = yield* VcKeys
    const rsa = yield* Keys
    const events = yield* Events
    const config = yield* Config
    const sql = yield* SqlClient.SqlClient
    const repo = makeRepo(sql)
    const verifier = makeVerifier({ keys, rsaJwks: rsa.jwks as any, lists: credentials.lists, baseUrl: config.publicBaseUrl })
    const context = JSON.stringify(agentAuthContext(config.publicBaseUrl))
    const typeMetadata = JSON.stringify(agentGrantTypeMetadata(config.publicBaseUrl))

    let published: { body: string; until: number } | undefined
    const document = Effect.gen(function*() {
      if (published !== undefined && published.until > Date.now()) return published.body
      const previous = keys.all.slice(1)
      const live = new Set(yield* repo.liveKids(previous.map((k) => k.kid), new Date(yield* nowMillis)).pipe(Effect.orDie))
      const body = JSON.stringify(didDocument({
        keys,
        credentialKeys: [keys.current, ...previous.filter((k) => live.has(k.kid))],
        rsaKeys: rsa.jwks.keys,
        baseUrl: config.publicBaseUrl
      }))
      published = { body, until: Date.now() + LIVE_KEYS_MS }
      return body
    })

    /** the outcome with our id for the credential it names, when its signature checked */
    const withId = (outcome: Outcome) =>
      Effect.gen(function*() {
        const named = outcome.payload?.jti ?? outcome.payload?.id
        const uuid = typeof named === "string" && named.startsWith("urn:uuid:") ? named.slice(9) : undefined
        const row = outcome.checks.signature && uuid !== undefined ? yield* credentials.credentialByUuid(uuid) : undefined
        return { outcome, row }
      })

    const check = (text: string, options: { requireKeyBinding: boolean; nonce?: string; audience?: string }) =>
      Effect.flatMap(nowMillis, (ms) => verifier.verify(text, Math.floor(ms / 1000), options, Effect.runPromise)).pipe(Effect.flatMap(withId))

    return handlers
      .handle("didDocument", () =>
        Effect.map(document, (body) =>
          HttpServerResponse.text(body, { contentType: "application/did+json", headers: { "cache-control": "public, max-age=300" } }) as any))
      .handle("context", () =>
        Effect.succeed(HttpServerResponse.text(context, { contentType: "application/ld+json", headers: { "cache-control": "public, max-age=86400" } }) as any))
      .handle("typeMetadata", () =>
        Effect.succeed(HttpServerResponse.text(typeMetadata, { contentType: "application/json", headers: { "cache-control": "public, max-age=86400" } }) as any))
      .handle("statusList", ({ path }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const served = yield* credentials.lists.serve(path.listId, formFor(request.headers["accept"]))
          if (served === undefined) return yield* Effect.fail(new NotFound({ message: "Status list not found" }))
          const headers = { "cache-control": `public, max-age=${LIST_TTL_SECONDS}`, etag: served.etag, vary: "Accept" }
          const inm = request.headers["if-none-match"]
          if (inm !== undefined && inm.split(",").some((tag) => tag.trim().replace(/^W\//, "") === served.etag)) return HttpServerResponse.empty({ status: 304, headers }) as any
          return HttpServerResponse.text(served.body, { contentType: served.contentType, headers }) as any
        }))
      .handle("verify", ({ payload }) =>
        Effect.map(check(payload.credential, { requireKeyBinding: false }), ({ outcome, row }) => ({
          valid: outcome.valid,
          vcId: row?.id ?? null,
          payload: outcome.payload,
          revoked: outcome.revoked,
          suspended: outcome.suspended,
          expired: outcome.expired,
          error: outcome.error,
          checks: outcome.checks
        })))
      .handle("present", ({ payload }) =>
        Effect.gen(function*() {
          const { outcome, row } = yield* check(payload.sdJwt, {
            requireKeyBinding: true,
            ...(payload.nonce !== undefined ? { nonce: payload.nonce } : {}),
            ...(payload.audience !== undefined ? { audience: payload.audience } : {})
          })
          if (outcome.checks.format !== null && outcome.checks.format !== "dc+sd-jwt" && outcome.checks.format !== "vc+sd-jwt") {
            return yield* Effect.fail(new BadRequest({ message: "sdJwt must be an SD-JWT VC" }))
          }
          if (outcome.valid && row !== undefined) {
            // ids and claim names only: the disclosed values may be personal data
            yield* events.emit(row.developerId, "sd-jwt.presented", {
              credentialId: row.id,
              grantId: row.grantId,
              disclosed: Object.keys(outcome.disclosedClaims ?? {})
            })
          }
          return {
            valid: outcome.valid,
            vcId: row?.id ?? null,
            disclosedClaims: outcome.valid ? outcome.disclosedClaims ?? {} : null,
            revoked: outcome.revoked,
            suspended: outcome.suspended,
            expired: outcome.expired,
            error: outcome.error,
            checks: outcome.checks
          }
        }))
      .handle("issue", ({ payload }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          if (payload.format !== "vc+jwt" && payload.format !== "dc+sd-jwt") {
            return yield* Effect.fail(new BadRequest({ message: "format must be vc+jwt or dc+sd-jwt" }))
          }
          let holderJwk: Record<string, string> | undefined
          if (payload.holderKey !== undefined) {
            if (payload.format !== "dc+sd-jwt") return yield* Effect.fail(new BadRequest({ message: "holderKey is only used with dc+sd-jwt" }))
            const holder = holderJwkOf(payload.holderKey)
            if ("error" in holder) return yield* Effect.fail(new BadRequest({ message: holder.error }))
            holderJwk = holder.jwk
          }
          const grant = yield* grants.find(developer.id, payload.grantId)
          if (grant === undefined) return yield* Effect.fail(new NotFound({ message: "Grant not found" }))
          const ms = yield* nowMillis
          if (grant.status !== "active" || grant.expiresAt.getTime() <= ms) {
            return yield* Effect.fail(new BadRequest({ message: "The grant is not active" }))
          }
          const row = yield* gate.transaction(Effect.gen(function*() {
            // locked as issuance locks it: a revocation that committed meanwhile answers 400, not a failed issuance
            const [locked] = yield* sql<{ status: string }>`SELECT status FROM grants WHERE id = ${grant.id} FOR SHARE`.pipe(Effect.orDie)
            if (locked?.status !== "active") return yield* Effect.fail(new BadRequest({ message: "The grant is not active" }))
            // decisions §20: the grant's agents and principal active, policies
            yield* gate.check("credential.issue", {
              developerId: developer.id, agentId: grant.agentId, principalId: grant.principalId, scopes: grant.scopes,
              grant: { id: grant.id, delegationDepth: grant.delegationDepth, parentGrantId: grant.parentGrantId }
            })
            return yield* credentials.issueOne(grant, payload.format as "vc+jwt" | "dc+sd-jwt", holderJwk)
          })).pipe(
            Effect.catchTag("GrantNoLongerActive", () => Effect.fail(new BadRequest({ message: "The grant is not active" })))
          )
          return credentialView(row, ms, credentials.agentDid(row.agentId))
        }))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const ms = yield* nowMillis
          const rows = yield* credentials.list(developer.id, {
            ...(urlParams.grantId ? { grantId: urlParams.grantId } : {}),
            ...(urlParams.principalId ? { principalId: urlParams.principalId } : {}),
            ...(urlParams.status ? { status: urlParams.status } : {})
          }, cursor, limit)
          const { page, nextCursor } = toPage(rows.map((r) => ({ ...r, createdAt: r.issuedAt })), limit)
          return { credentials: page.map((r) => credentialView(r, ms, credentials.agentDid(r.agentId))), nextCursor }
        }))
      .handle("get", ({ path }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const row = yield* credentials.find(developer.id, path.id)
          return credentialView(row, yield* nowMillis, credentials.agentDid(row.agentId))
        }))
  }))
