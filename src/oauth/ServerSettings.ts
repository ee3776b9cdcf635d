/**
 * The checks of a resource server's settings (decisions §22.2), shared by registration and PATCH:
 * name, scopes (RFC 6749 scope-tokens, unique, described in at most 200 characters), default scopes
 * among them, the two lifetimes, open registration and its required login method.
 */
import { BadRequest, InvalidScopes } from "../platform/Errors.ts"
import { parseDuration } from "../platform/Time.ts"
import { LoginMethodRequired } from "./Errors.ts"
import { isLoopbackHost, isScopeToken } from "./Rules.ts"

export interface SettingsInput {
  readonly name: string
  readonly scopes: ReadonlyArray<{ readonly name: string; readonly description?: string | undefined }>
  readonly defaultScopes?: ReadonlyArray<string> | undefined
  readonly accessTokenTtl?: string | undefined
  readonly grantTtl?: string | undefined
  readonly openRegistration?: { readonly dcr?: boolean | undefined; readonly cimd?: boolean | undefined; readonly cimdAllowedHosts?: ReadonlyArray<string> | undefined } | undefined
  readonly login: { readonly sso?: boolean | undefined; readonly passkey?: boolean | undefined; readonly developerLoginUrl?: string | undefined }
}

/** "3600" seconds → "1h": the largest unit that divides it */
export const durationText = (seconds: number) =>
  seconds % 86400 === 0 ? `${seconds / 86400}d` : seconds % 3600 === 0 ? `${seconds / 3600}h` : seconds % 60 === 0 ? `${seconds / 60}m` : `${seconds}s`

const ttl = (text: string | undefined, fallback: number, min: number, max: number, field: string) => {
  if (text === undefined) return fallback
  const seconds = parseDuration(text)
  if (seconds === undefined || seconds < min || seconds > max) return new BadRequest({ message: `${field} must be a duration from ${durationText(min)} to ${durationText(max)}` })
  return seconds
}

const HOST = /^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)*[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$|^\[[0-9a-f:.]+\]$/

export const settingsOf = (input: SettingsInput, production: boolean) => {
  const fail = (error: BadRequest | InvalidScopes | LoginMethodRequired) => ({ error }) as const
  if (input.name.length < 1 || input.name.length > 100) return fail(new BadRequest({ message: "name must be 1 to 100 characters" }))
  if (input.scopes.length < 1 || input.scopes.length > 100) return fail(new InvalidScopes({ message: "scopes must list 1 to 100 scopes" }))
  const names = input.scopes.map((s) => s.name)
  const bad = names.find((n) => !isScopeToken(n))
  if (bad !== undefined) {
    return fail(new InvalidScopes({ message: `scope ${JSON.stringify(bad.slice(0, 130))} is not an RFC 6749 scope-token (1-128 characters, no space, quote or backslash)` }))
  }
  if (new Set(names).size !== names.length) return fail(new InvalidScopes({ message: "scopes must not repeat a name" }))
  if (input.scopes.some((s) => s.description !== undefined && s.description.length > 200)) {
    return fail(new InvalidScopes({ message: "a scope description may be at most 200 characters" }))
  }
  const defaults = input.defaultScopes ?? []
  const outside = defaults.filter((d) => !names.includes(d))
  if (outside.length > 0) return fail(new InvalidScopes({ message: `defaultScopes not in scopes: ${outside.join(", ")}` }))
  const accessTtl = ttl(input.accessTokenTtl, 3600, 300, 86400, "accessTokenTtl")
  if (typeof accessTtl !== "number") return fail(accessTtl)
  const grantTtl = ttl(input.grantTtl, 30 * 86400, 3600, 366 * 86400, "grantTtl")
  if (typeof grantTtl !== "number") return fail(grantTtl)
  const open = input.openRegistration ?? {}
  const login = { sso: input.login.sso ?? false, passkey: input.login.passkey ?? false, developerLoginUrl: input.login.developerLoginUrl }
  if (login.developerLoginUrl !== undefined) {
    let url: URL | undefined
    try {
      url = new URL(login.developerLoginUrl)
    } catch {
      url = undefined
    }
    const ok = url !== undefined && (url.protocol === "https:" || (url.protocol === "http:" && isLoopbackHost(url.hostname) && !production)) &&
      !login.developerLoginUrl.includes("#")
    if (!ok) return fail(new BadRequest({ message: "login.developerLoginUrl must be an https URL (http only for a loopback host outside production)" }))
  }
  if ((open.dcr === true || open.cimd === true) && login.developerLoginUrl === undefined && !login.sso && !login.passkey) {
    return fail(new LoginMethodRequired({ message: "open registration needs at least one login method" }))
  }
  if (open.cimdAllowedHosts !== undefined && open.cimdAllowedHosts.length > 100) {
    return fail(new BadRequest({ message: "cimdAllowedHosts may list at most 100 hosts" }))
  }
  // host names as the client_id URL's host is compared (lowercase, no port, no scheme)
  const badHost = open.cimdAllowedHosts?.find((h) => !HOST.test(h) || h.length > 253)
  if (badHost !== undefined) return fail(new BadRequest({ message: `cimdAllowedHosts: ${JSON.stringify(badHost.slice(0, 260))} is not a lowercase host name` }))
  return { names, defaults, accessTtl, grantTtl, open, login }
}
