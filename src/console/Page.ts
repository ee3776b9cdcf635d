/**
 * What a console page is: a renderer over the public API and the actions its forms post, each one
 * API operation called as the signed-in key (SelfApi). Shared by every page module.
 */
import { Effect } from "effect"
import { escape, type Frame } from "./Layout.ts"
import type { ApiAnswer } from "./SelfApi.ts"

export type Api = (method: string, path: string, body?: unknown) => Effect.Effect<ApiAnswer>

export interface Ctx {
  readonly frame: Frame
  readonly api: Api
  readonly query: URLSearchParams
}

export interface ActionResult {
  readonly ok: boolean
  /** HTML shown above the page */
  readonly html: string
}

export type Form = Readonly<Record<string, string>>

export interface ConsolePage {
  readonly title: string
  readonly render: (ctx: Ctx) => Effect.Effect<string>
  readonly actions: Readonly<Record<string, (ctx: Ctx, form: Form) => Effect.Effect<ActionResult>>>
}

export const failed = (a: ApiAnswer) => a.status >= 400

/** an API refusal as the API said it: code, message, details */
export const problem = (a: ApiAnswer) => {
  const b = a.body ?? {}
  const details = Array.isArray(b.details) && b.details.length > 0
    ? `<ul>${b.details.map((d: any) => `<li><code>${escape(d.path)}</code>: ${escape(d.message)}</li>`).join("")}</ul>`
    : ""
  return `<p class="bad"><strong>${escape(b.code ?? `HTTP ${a.status}`)}</strong>: ${escape(b.message ?? "")}</p>${details}`
}

/** the result of an action from its API answer */
export const outcome = (a: ApiAnswer, success: (body: any) => string): ActionResult =>
  failed(a) ? { ok: false, html: problem(a) } : { ok: true, html: success(a.body) }

/** a query string from the defined, non-empty values */
export const qs = (params: Record<string, string | undefined | null>) => {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, v)
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

/** comma- or newline-separated text as a list */
export const list = (text: string | undefined) => (text ?? "").split(/[,\n]/).map((s) => s.trim()).filter((s) => s !== "")

/** a GET whose refusal is shown in place of its content */
export const read = (ctx: Ctx, path: string, f: (body: any) => string) =>
  Effect.map(ctx.api("GET", path), (a) => failed(a) ? problem(a) : f(a.body))
