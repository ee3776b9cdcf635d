/** Signing in to the console without a browser: the sign-in form's cookie and token, then the session cookie. */
import type { TestApp } from "../support/app.ts"

export interface ConsoleClient {
  readonly cookie: string
  readonly csrf: string
  readonly get: (path: string) => Promise<{ status: number; text: string; headers: Headers }>
  readonly post: (path: string, form: Record<string, string>, headers?: Record<string, string>) => Promise<{ status: number; text: string; headers: Headers }>
}

export const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)?.[1]

/** same-origin form posts, as a browser sends them */
const SAME_ORIGIN = { "sec-fetch-site": "same-origin" }

export const signIn = async (app: TestApp, apiKey: string): Promise<ConsoleClient & { signInResponse: Response }> => {
  const form = await fetch(`${app.url}/console`, { redirect: "manual" })
  const formHtml = await form.text()
  const signInCookie = form.headers.get("set-cookie")!.split(";")[0]!
  const response = await fetch(`${app.url}/console/sign-in`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: signInCookie, ...SAME_ORIGIN },
    body: new URLSearchParams({ apiKey, csrf: csrfOf(formHtml)! }).toString()
  })
  const cookie = (response.headers.get("set-cookie") ?? "").split(";")[0]!
  const get = async (path: string) => {
    const r = await fetch(`${app.url}${path}`, { headers: { cookie }, redirect: "manual" })
    return { status: r.status, text: await r.text(), headers: r.headers }
  }
  const overview = await get("/console/overview")
  const csrf = csrfOf(overview.text) ?? ""
  const post = async (path: string, body: Record<string, string>, headers: Record<string, string> = SAME_ORIGIN) => {
    const r = await fetch(`${app.url}${path}`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie, ...headers },
      body: new URLSearchParams(body).toString()
    })
    return { status: r.status, text: await r.text(), headers: r.headers }
  }
  return { cookie, csrf, get, post, signInResponse: response }
}
