/**
 * The console's handlers (decisions §23): sessions from the cookie, CSRF and Origin checks on every
 * post, then the page or action, which reach the service only through its public API (SelfApi).
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { randomBytes } from "node:crypto"
import { Effect, Option } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { fromAnotherSite } from "../platform/FormOrigin.ts"
import { PeerAddress } from "../platform/RateLimit.ts"
import { htmlPage } from "../platform/HtmlPage.ts"
import { card, consolePage, type Frame, messagePage, type Page, signInPage } from "./Layout.ts"
import type { ConsolePage, Ctx } from "./Page.ts"
import { agents, consent, overview } from "./PagesCore.ts"
import { anomalies, directory, keys, sso } from "./PagesAdmin.ts"
import { audit, policies, webhooks } from "./PagesOps.ts"
import { billing, breaches, compliance, dpdp, vault } from "./PagesRecords.ts"
import { callApi, type Origin, SelfApi } from "./SelfApi.ts"
import { type ConsoleSession, ConsoleSessions, SESSION_COOKIE, SESSION_HOURS, SIGN_IN_COOKIE, sameToken } from "./Sessions.ts"

export const PAGES: Readonly<Record<string, ConsolePage>> = {
  overview, agents, consent, audit, webhooks, policies, anomalies, keys, directory, sso, vault, breaches, compliance, billing, dpdp
}

const cookie = (name: string, value: string, maxAgeSeconds: number) =>
  `${name}=${value}; Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}`

const html = htmlPage

const redirect = (location: string, setCookie?: string) =>
  HttpServerResponse.empty({ status: 303, headers: { location, "cache-control": "no-store", ...(setCookie === undefined ? {} : { "set-cookie": setCookie }) } })

const refused = () =>
  html(messagePage("Not allowed", "This form was sent from another site or from an expired page, so it was refused. Nothing was changed. Reload the page and try again."), 403)


export const ConsoleHttp = HttpApiBuilder.group(Api, "console", (handlers) =>
  Effect.gen(function*() {
    const sessions = yield* ConsoleSessions
    const config = yield* Config
    const self = yield* SelfApi

    const signIn = (message?: string, status = 200) => {
      const csrf = randomBytes(24).toString("base64url")
      return html(signInPage(csrf, message), status, cookie(SIGN_IN_COOKIE, csrf, 3600))
    }
    const currentSession = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const token = request.cookies[SESSION_COOKIE]
      if (token === undefined) return undefined
      const session = yield* sessions.resolve(token)
      return session === undefined ? undefined : { token, session }
    })

    /** the browser's address as the gate would see it, handed on with each API call */
    const origin: Effect.Effect<Origin, never, HttpServerRequest.HttpServerRequest> = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      const peer = Option.getOrUndefined(yield* Effect.serviceOption(PeerAddress)) ?? Option.getOrUndefined(request.remoteAddress)
      return { peer, forwardedFor: request.headers["x-forwarded-for"] }
    })

    /** renders a page as the session's key; a key the API no longer accepts ends the session */
    const render = (name: string, token: string, session: ConsoleSession, query: URLSearchParams, result?: { ok: boolean; html: string }) =>
      Effect.gen(function*() {
        const page = PAGES[name]
        if (page === undefined) return html(messagePage("Not found", "There is no such console page."), 404)
        let unauthorized = false
        const from = yield* origin
        const frame: Frame = { current: name, developerName: session.developerName, scope: session.scope, csrf: session.csrf }
        const ctx: Ctx = {
          frame,
          query,
          api: (method, path, body) =>
            Effect.tap(callApi(config.publicBaseUrl, session.apiKey, method, path, body, from).pipe(Effect.provideService(SelfApi, self)), (a) =>
              Effect.sync(() => {
                if (a.status === 401) unauthorized = true
              }))
        }
        const action = result === undefined ? "" : `<div role="status">${card(result.ok ? "Done" : "Refused", result.html).replace('class="card"', `class="card ${result.ok ? "notice" : "error"}"`)}</div>`
        const content = yield* page.render(ctx)
        if (unauthorized) {
          yield* sessions.end(token)
          return redirect("/console", cookie(SESSION_COOKIE, "", 0))
        }
        return html(consolePage(frame, page.title, action + content))
      })

    const show = (name: string) =>
      Effect.gen(function*() {
        const current = yield* currentSession
        if (current === undefined) return signIn()
        const request = yield* HttpServerRequest.HttpServerRequest
        const query = new URL(request.url, "http://console").searchParams
        return yield* render(name, current.token, current.session, query)
      })

    return handlers
      .handle("live", ({ urlParams, headers }) =>
        Effect.gen(function*() {
          const current = yield* currentSession
          if (current === undefined) {
            return HttpServerResponse.text(JSON.stringify({ code: "UNAUTHORIZED", message: "Sign in to the console first" }), { status: 401, contentType: "application/json" })
          }
          const from = yield* origin
          const upstream = yield* Effect.promise(() =>
            self.fetch(new Request(new URL(`/v1/events/stream${urlParams.types ? `?types=${encodeURIComponent(urlParams.types)}` : ""}`, config.publicBaseUrl), {
              headers: {
                authorization: `Bearer ${current.session.apiKey}`,
                ...(headers["last-event-id"] === undefined ? {} : { "last-event-id": headers["last-event-id"] }),
                ...(from.forwardedFor === undefined ? {} : { "x-forwarded-for": from.forwardedFor })
              }
            }), from.peer))
          if (upstream.status === 401) yield* sessions.end(current.token)
          if (upstream.status !== 200 || upstream.body === null) {
            const text = yield* Effect.promise(() => upstream.text())
            return HttpServerResponse.text(text, { status: upstream.status, contentType: "application/json" })
          }
          return HttpServerResponse.raw(upstream.body, {
            status: 200,
            contentType: "text/event-stream",
            headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
          })
        }))
      .handle("home", () => show("overview"))
      .handle("page", ({ path }) => show(path.page))
      .handle("signIn", ({ payload }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const expected = request.cookies[SIGN_IN_COOKIE]
          if (fromAnotherSite(request, config.publicBaseUrl) || expected === undefined || !sameToken(expected, payload.csrf ?? "")) return refused()
          const created = yield* sessions.create(payload.apiKey.trim())
          if (created === undefined) return signIn("That API key was not accepted.", 401)
          return redirect("/console/overview", cookie(SESSION_COOKIE, created.token, SESSION_HOURS * 3600))
        }))
      .handle("signOut", ({ payload }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          if (fromAnotherSite(request, config.publicBaseUrl)) return refused()
          const current = yield* currentSession
          if (current !== undefined) {
            if (!sameToken(current.session.csrf, payload.csrf ?? "")) return refused()
            yield* sessions.end(current.token)
          }
          return redirect("/console", cookie(SESSION_COOKIE, "", 0))
        }))
      .handle("action", ({ path, payload }) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          if (fromAnotherSite(request, config.publicBaseUrl)) return refused()
          const current = yield* currentSession
          if (current === undefined) return redirect("/console")
          if (!sameToken(current.session.csrf, payload.csrf ?? "")) return refused()
          const act = PAGES[path.page]?.actions[path.action]
          if (act === undefined) return html(messagePage("Not found", "There is no such console action."), 404)
          const form: Record<string, string> = {}
          for (const [k, v] of Object.entries(payload)) if (k !== "csrf" && typeof v === "string") form[k] = v
          let unauthorized = false
          const from = yield* origin
          const ctx: Ctx = {
            frame: { current: path.page, developerName: current.session.developerName, scope: current.session.scope, csrf: current.session.csrf },
            query: new URLSearchParams(),
            api: (method, p, body) =>
              Effect.tap(callApi(config.publicBaseUrl, current.session.apiKey, method, p, body, from).pipe(Effect.provideService(SelfApi, self)), (a) =>
                Effect.sync(() => {
                  if (a.status === 401) unauthorized = true
                }))
          }
          const result = yield* act(ctx, form)
          if (unauthorized) {
            yield* sessions.end(current.token)
            return redirect("/console", cookie(SESSION_COOKIE, "", 0))
          }
          // the page after an action shows the state the action left (a webhook's deliveries, a request looked up)
          const query = new URLSearchParams()
          if (form.webhookId && path.action !== "remove") query.set("webhook", form.webhookId)
          if (path.page === "policies" && path.action === "evaluate") for (const [k, v] of Object.entries(form)) query.set(k, v)
          return yield* render(path.page, current.token, current.session, query, result)
        }))
  }))
