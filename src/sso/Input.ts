/**
 * The body of `POST /v1/sso/connections` and `PATCH /v1/sso/connections/:id` (decisions §12),
 * checked field by field into what is stored: 400 BAD_REQUEST with `details` for a bad field, 422
 * PROTOCOL_NOT_SUPPORTED for `ldap`. A patch is checked against the stored connection (the
 * protocol cannot change; OIDC and SAML settings are merged with what is there).
 */
import { Effect } from "effect"
import { redirectUriProblem } from "../agents/RedirectUri.ts"
import { BadRequest, ProtocolNotSupported } from "../platform/Errors.ts"
import { checkReceiverName, checkReceiverUrl } from "../platform/Outbound.ts"
import type { Connection, ConnectionFields, OidcSettings, Protocol, SamlSettings } from "./Connections.ts"
import type { SamlInput, SamlProtocolService } from "./Protocol.ts"

export const MAX_CONNECTIONS = 20
export const MAX_DOMAINS = 50

export interface ConnectionInput extends SamlInput {
  readonly name?: string | undefined
  readonly protocol?: string | undefined
  readonly status?: string | undefined
  readonly domains?: ReadonlyArray<string> | undefined
  readonly jitProvisioning?: boolean | undefined
  readonly enforce?: boolean | undefined
  readonly groupsClaim?: string | null | undefined
  /** the published protocol's name for groupsClaim */
  readonly groupAttribute?: string | null | undefined
  readonly groupMappings?: Readonly<Record<string, ReadonlyArray<string>>> | undefined
  readonly defaultScopes?: ReadonlyArray<string> | undefined
  readonly allowedRedirectUris?: ReadonlyArray<string> | undefined
  readonly issuerUrl?: string | undefined
  readonly clientId?: string | undefined
  readonly clientSecret?: string | undefined
  readonly tokenEndpointAuthMethod?: string | undefined
  readonly scopes?: string | undefined
  readonly tenantMode?: string | undefined
  readonly allowedTenants?: ReadonlyArray<string> | undefined
}

/** What a create or a patch writes (every field resolved against the stored connection). */
export interface ConnectionValues extends ConnectionFields {
  readonly oidc: OidcSettings | null
  /** a new client secret to seal (undefined: keep the stored one) */
  readonly clientSecret: string | undefined
  readonly saml: SamlSettings | null
}

const bad = (path: string, message: string) => new BadRequest({ message: `${path}: ${message}`, details: [{ path, message }] })

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$/
const SCOPE = /^[A-Za-z0-9:._*\/-]{1,200}$/

const checkScopes = (path: string, scopes: ReadonlyArray<string>) =>
  scopes.length > 100
    ? Effect.fail(bad(path, "at most 100 scopes"))
    : scopes.every((s) => SCOPE.test(s))
    ? Effect.succeed([...new Set(scopes)])
    : Effect.fail(bad(path, "scopes are 1-200 characters of letters, digits and : . _ * / -"))

const text = (path: string, value: string | undefined, max: number) =>
  value === undefined ? Effect.succeed(undefined) : value.trim().length === 0 || value.length > max
    ? Effect.fail(bad(path, `must be 1-${max} characters`))
    : Effect.succeed(value.trim())

export const connectionValues = (
  input: ConnectionInput,
  current: Connection | undefined,
  options: { readonly allowPrivateHosts: boolean; readonly saml: SamlProtocolService }
) =>
  Effect.gen(function*() {
    if (input.protocol === "ldap") {
      return yield* Effect.fail(new ProtocolNotSupported({ message: "protocol ldap is not supported: use oidc or saml" }))
    }
    if (input.protocol !== undefined && input.protocol !== "oidc" && input.protocol !== "saml") {
      return yield* Effect.fail(bad("protocol", "must be oidc or saml"))
    }
    const protocol = (input.protocol ?? current?.protocol) as Protocol | undefined
    if (protocol === undefined) return yield* Effect.fail(bad("protocol", "is required (oidc or saml)"))
    if (current !== undefined && protocol !== current.protocol) return yield* Effect.fail(bad("protocol", "cannot change; create a new connection"))
    const name = (yield* text("name", input.name, 100)) ?? current?.name
    if (name === undefined) return yield* Effect.fail(bad("name", "is required"))
    if (input.status !== undefined && input.status !== "active" && input.status !== "inactive") {
      return yield* Effect.fail(bad("status", "must be active or inactive"))
    }
    const domains = input.domains === undefined ? current?.domains ?? [] : [...new Set(input.domains.map((d) => d.trim().toLowerCase()))]
    if (domains.length > MAX_DOMAINS) return yield* Effect.fail(bad("domains", `at most ${MAX_DOMAINS} domains`))
    const wrongDomain = domains.find((d) => !DOMAIN.test(d))
    if (wrongDomain !== undefined) return yield* Effect.fail(bad("domains", `${wrongDomain.slice(0, 100)} is not a domain name`))
    const groupsClaimInput = input.groupsClaim !== undefined ? input.groupsClaim : input.groupAttribute
    if (groupsClaimInput != null && (groupsClaimInput.length === 0 || groupsClaimInput.length > 200)) {
      return yield* Effect.fail(bad("groupsClaim", "must be 1-200 characters"))
    }
    const groupMappings: Record<string, ReadonlyArray<string>> = {}
    const mappings = input.groupMappings ?? current?.groupMappings ?? {}
    if (Object.keys(mappings).length > 200) return yield* Effect.fail(bad("groupMappings", "at most 200 groups"))
    for (const [group, scopes] of Object.entries(mappings)) {
      if (group.length === 0 || group.length > 256) return yield* Effect.fail(bad("groupMappings", "group names are 1-256 characters"))
      groupMappings[group] = yield* checkScopes(`groupMappings.${group}`, scopes)
    }
    const defaultScopes = yield* checkScopes("defaultScopes", input.defaultScopes ?? current?.defaultScopes ?? [])
    const allowedRedirectUris = [...new Set(input.allowedRedirectUris ?? current?.allowedRedirectUris ?? [])]
    if (allowedRedirectUris.length > 20) return yield* Effect.fail(bad("allowedRedirectUris", "at most 20"))
    for (const uri of allowedRedirectUris) {
      const problem = redirectUriProblem(uri)
      if (problem !== undefined) return yield* Effect.fail(bad("allowedRedirectUris", problem.replace("redirectUri", uri.slice(0, 100))))
    }
    const oidc = protocol === "oidc" ? yield* oidcValues(input, current?.oidc ?? null, options.allowPrivateHosts) : null
    if (protocol === "oidc" && current === undefined && (input.clientSecret === undefined || input.clientSecret.length === 0)) {
      return yield* Effect.fail(bad("clientSecret", "is required"))
    }
    if (input.clientSecret !== undefined && (input.clientSecret.length === 0 || input.clientSecret.length > 2000)) {
      return yield* Effect.fail(bad("clientSecret", "must be 1-2000 characters"))
    }
    const saml = protocol === "saml" ? yield* options.saml.settings(input, current?.saml ?? null) : null
    return {
      name,
      protocol,
      status: (input.status ?? current?.status ?? "active") as "active" | "inactive",
      domains,
      jitProvisioning: input.jitProvisioning ?? current?.jitProvisioning ?? true,
      enforce: input.enforce ?? current?.enforce ?? false,
      groupsClaim: groupsClaimInput === undefined ? current?.groupsClaim ?? null : groupsClaimInput,
      groupMappings,
      defaultScopes,
      allowedRedirectUris,
      oidc,
      clientSecret: protocol === "oidc" ? input.clientSecret : undefined,
      saml
    } satisfies ConnectionValues
  })

const oidcValues = (input: ConnectionInput, current: OidcSettings | null, allowPrivateHosts: boolean) =>
  Effect.gen(function*() {
    const issuerUrl = input.issuerUrl?.trim() ?? current?.issuerUrl
    if (issuerUrl === undefined) return yield* Effect.fail(bad("issuerUrl", "is required"))
    const check = checkReceiverUrl(issuerUrl, allowPrivateHosts)
    if (!check.ok) return yield* Effect.fail(bad("issuerUrl", check.reason))
    const named = yield* Effect.promise(() => checkReceiverName(check.url, allowPrivateHosts))
    if (!named.ok) return yield* Effect.fail(bad("issuerUrl", named.reason))
    const clientId = (yield* text("clientId", input.clientId, 500)) ?? current?.clientId
    if (clientId === undefined) return yield* Effect.fail(bad("clientId", "is required"))
    const method = input.tokenEndpointAuthMethod ?? current?.tokenEndpointAuthMethod ?? "client_secret_basic"
    if (method !== "client_secret_basic" && method !== "client_secret_post") {
      return yield* Effect.fail(bad("tokenEndpointAuthMethod", "must be client_secret_basic or client_secret_post"))
    }
    const scopes = (input.scopes ?? current?.scopes ?? "openid email profile").trim().split(/\s+/)
    if (!scopes.includes("openid") || scopes.length > 30 || scopes.some((s) => !/^[\x21\x23-\x5b\x5d-\x7e]{1,100}$/.test(s))) {
      return yield* Effect.fail(bad("scopes", "space-separated scopes including openid"))
    }
    const tenantMode = input.tenantMode ?? current?.tenantMode ?? "single"
    if (tenantMode !== "single" && tenantMode !== "entra-multi") return yield* Effect.fail(bad("tenantMode", "must be single or entra-multi"))
    const allowedTenants = yield* tenantsOf(tenantMode, input.allowedTenants ?? (input.tenantMode === undefined || input.tenantMode === current?.tenantMode ? current?.allowedTenants : undefined))
    return { issuerUrl, clientId, tokenEndpointAuthMethod: method, scopes: [...new Set(scopes)].join(" "), tenantMode, allowedTenants } satisfies OidcSettings
  })

/** an Entra tenant id: a GUID as Entra issues them (the `tid` claim) */
const TENANT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

/** entra-multi takes people of the listed tenants only (1-100 tenant ids); single takes none (its issuer is one tenant) */
const tenantsOf = (tenantMode: "single" | "entra-multi", input: ReadonlyArray<string> | undefined) => {
  if (tenantMode === "single") {
    return input === undefined || input.length === 0
      ? Effect.succeed<ReadonlyArray<string>>([])
      : Effect.fail(bad("allowedTenants", "only with tenantMode entra-multi"))
  }
  if (input === undefined || input.length === 0) {
    return Effect.fail(bad("allowedTenants", "is required with tenantMode entra-multi: the Entra tenant ids whose people may sign in"))
  }
  if (input.length > 100) return Effect.fail(bad("allowedTenants", "at most 100 tenant ids"))
  const tenants = [...new Set(input.map((t) => t.trim().toLowerCase()))]
  const wrong = tenants.find((t) => !TENANT.test(t))
  return wrong === undefined
    ? Effect.succeed<ReadonlyArray<string>>(tenants)
    : Effect.fail(bad("allowedTenants", `${wrong.slice(0, 60)} is not an Entra tenant id (a GUID)`))
}
