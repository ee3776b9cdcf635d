/**
 * Handlers of the OAuth server (decisions §22): thin, each decodes what it needs (forms are read
 * here, so a repeated parameter is refused) and calls one service.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { htmlResponse, messagePage, seeOther } from "../authorization/ConsentPage.ts"
import { OAUTH_INTERACTION_COOKIE } from "../authorization/OAuthRequests.ts"
import { Config } from "../Config.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { Clients } from "./Clients.ts"
import { OAuthInvalidRequest, OAuthNotFound } from "./Errors.ts"
import { type BrowserAnswer, Flow, type Params } from "./Flow.ts"
import { authorizationServerMetadata, protectedResourceMetadata } from "./Metadata.ts"
import { ResourceServers } from "./ResourceServers.ts"
import { OAuthSignIn } from "./SignIn.ts"
import { render as renderSignIn } from "./SignInHttp.ts"
import { OAuthTokens } from "./Tokens.ts"
import type { Form } from "./TokenTypes.ts"

const PUBLIC_DOCUMENT = { "cache-control": "public, max-age=300", "access-control-allow-origin": "*" }
const NO_STORE = { "cache-control": "no-store", pragma: "no-cache" }

const render = (answer: BrowserAnswer) =>
  answer._tag === "Redirect"
    ? seeOther(answer.location, answer.cookie !== undefined ? { "set-cookie": answer.cookie } : {})
    : htmlResponse(messagePage(answer.title, answer.message), answer.status)

/** parameters of a query or form; a repeated one keeps every value (the flow refuses it) */
const paramsOf = (search: URLSearchParams): Params => {
  const out: Record<string, string | Array<string>> = {}
  for (const [k, v] of search) {
    const prior = out[k]
    out[k] = prior === undefined ? v : Array.isArray(prior) ? [...prior, v] : [prior, v]
  }
  return out
}

/** a urlencoded body as single values: anything else, or a repeated parameter, is invalid_request (RFC 6749 §3.1) */
const readForm = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const type = (request.headers["content-type"] ?? "").toLowerCase()
  if (!type.startsWith("application/x-www-form-urlencoded")) {
    return yield* Effect.fail(new OAuthInvalidRequest({ message: "the body must be application/x-www-form-urlencoded" }))
  }
  const text = yield* request.text.pipe(Effect.orElseSucceed(() => ""))
  const form: Record<string, string> = {}
  for (const [k, v] of new URLSearchParams(text)) {
    if (k in form) return yield* Effect.fail(new OAuthInvalidRequest({ message: `${k} was sent more than once` }))
    form[k] = v
  }
  if (form.request !== undefined || form.request_uri !== undefined) return yield* Effect.fail(new OAuthInvalidRequest({ message: "request and request_uri are not supported" }))
  return { form: form as Form, authorization: request.headers["authorization"] }
})

const credentialsOf = (form: Form, authorization: string | undefined) => ({ authorization, clientId: form.client_id, clientSecret: form.client_secret })

export const ResourceServersHttp = HttpApiBuilder.group(Api, "resourceServers", (handlers) =>
  Effect.gen(function*() {
    const servers = yield* ResourceServers
    const flow = yield* Flow
    const clients = yield* Clients
    return handlers
      .handle("clientSecret", ({ path, payload }) => Effect.flatMap(CurrentDeveloper, (d) => clients.issueSecret(d.id, path.id, payload)))
      .handle("create", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => servers.create(d, payload)))
      .handle("list", () => Effect.flatMap(CurrentDeveloper, (d) => Effect.map(servers.list(d), (list) => ({ resourceServers: list }))))
      .handle("get", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => servers.get(d, path.id)))
      .handle("update", ({ path, payload }) => Effect.flatMap(CurrentDeveloper, (d) => servers.update(d, path.id, payload)))
      .handle("rotateSecret", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => servers.rotateSecret(d, path.id)))
      .handle("remove", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => servers.remove(d, path.id)))
      .handle("interaction", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => flow.interaction(d.id, path.id) as Effect.Effect<any, any>))
      .handle("interactionPrincipal", ({ path, payload }) => Effect.flatMap(CurrentDeveloper, (d) => flow.setPrincipal(d.id, path.id, payload.principalId)))
  }))

export const OAuthHttp = HttpApiBuilder.group(Api, "oauth", (handlers) =>
  Effect.gen(function*() {
    const servers = yield* ResourceServers
    const flow = yield* Flow
    const tokens = yield* OAuthTokens
    const clients = yield* Clients
    const config = yield* Config
    const signIn = yield* OAuthSignIn
    const cookie = Effect.map(HttpServerRequest.HttpServerRequest, (r) => r.cookies[OAUTH_INTERACTION_COOKIE])
    return handlers
      .handle("metadata", ({ path }) =>
        Effect.gen(function*() {
          const list = yield* servers.ofDeveloper(path.developerId)
          if (list.length === 0) return yield* Effect.fail(new OAuthNotFound({ message: "No such issuer" }))
          return HttpServerResponse.unsafeJson(authorizationServerMetadata(config.oauth.issuerBase, config.publicBaseUrl, path.developerId, list), { headers: PUBLIC_DOCUMENT })
        }))
      .handle("protectedResource", ({ path }) =>
        Effect.gen(function*() {
          const rs = (yield* servers.ofDeveloper(path.developerId)).find((s) => s.id === path.resourceServerId)
          if (rs === undefined) return yield* Effect.fail(new OAuthNotFound({ message: "No such resource server" }))
          return HttpServerResponse.unsafeJson(protectedResourceMetadata(config.oauth.issuerBase, rs), { headers: PUBLIC_DOCUMENT })
        }))
      .handle("authorize", ({ path }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const query = request.url.indexOf("?")
          return render(yield* flow.authorize(path.developerId, paramsOf(new URLSearchParams(query < 0 ? "" : request.url.slice(query + 1)))))
        }))
      .handle("authorizeForm", ({ path }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const text = yield* request.text.pipe(Effect.orElseSucceed(() => ""))
          return render(yield* flow.authorize(path.developerId, paramsOf(new URLSearchParams(text))))
        }))
      .handle("login", ({ path, urlParams }) =>
        Effect.flatMap(HttpServerRequest.HttpServerRequest, (r) => Effect.map(signIn.chooser(path.developerId, urlParams.ix ?? "", r.cookies), renderSignIn)))
      .handle("resume", ({ path, urlParams }) =>
        Effect.flatMap(cookie, (c) => Effect.map(flow.resume(path.developerId, path.id, urlParams.token, c), render)))
      .handle("register", ({ path, payload }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          if (!(request.headers["content-type"] ?? "").toLowerCase().startsWith("application/json")) {
            return yield* Effect.fail(new OAuthInvalidRequest({ message: "the body must be application/json" }))
          }
          const client = yield* clients.register(path.developerId, payload)
          return HttpServerResponse.unsafeJson(client, { status: 201, headers: { ...NO_STORE, "access-control-allow-origin": "*" } })
        }))
      .handle("token", ({ path }) =>
        Effect.gen(function*() {
          const { form, authorization } = yield* readForm
          const answer = yield* tokens.token(path.developerId, form, credentialsOf(form, authorization))
          return HttpServerResponse.unsafeJson(answer, { headers: { ...NO_STORE, "access-control-allow-origin": "*" } })
        }))
      .handle("introspect", ({ path }) =>
        Effect.gen(function*() {
          const { form, authorization } = yield* readForm
          return HttpServerResponse.unsafeJson(yield* tokens.introspect(path.developerId, form, authorization), { headers: NO_STORE })
        }))
      .handle("revoke", ({ path }) =>
        Effect.gen(function*() {
          const { form, authorization } = yield* readForm
          yield* tokens.revoke(path.developerId, form, credentialsOf(form, authorization))
          return HttpServerResponse.empty({ status: 200, headers: { ...NO_STORE, "access-control-allow-origin": "*" } })
        }))
  }))
