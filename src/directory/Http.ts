/**
 * HTTP handlers of the directory. SCIM handlers parse their own bodies (JSON sent as
 * application/scim+json or application/json; platform/Body.ts has read them, within 1 MiB) and
 * answer every outcome as application/scim+json; the gate (platform/RateLimit.ts) has already
 * authenticated the SCIM token and counted the request.
 */
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { bearerOf, CurrentDeveloper, CurrentGate, ScimTokenResolver } from "../platform/Auth.ts"
import { resourceTypes, schemas, serviceProviderConfig } from "./Discovery.ts"
import { Groups, type GroupWithMembers } from "./Groups.ts"
import { etagOf, ScimError, scimErrorResponse, scimFail, scimJson, versionsIn } from "./Scim.ts"
import { Directory } from "./Service.ts"
import { excludes, groupView, listResponse, project, userView } from "./View.ts"

const MAX_DEPTH = 64

/** whether a parsed JSON value nests deeper than `max` (iterative: no recursion on request data) */
const tooDeep = (root: unknown, max: number) => {
  const stack: Array<[unknown, number]> = [[root, 1]]
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!
    if (value === null || typeof value !== "object") continue
    if (depth > max) return true
    for (const child of Object.values(value)) stack.push([child, depth + 1])
  }
  return false
}

const readBody = Effect.gen(function*() {
  const request = yield* HttpServerRequest.HttpServerRequest
  const type = (request.headers["content-type"] ?? "application/json").toLowerCase()
  if (!type.includes("application/json") && !type.includes("application/scim+json")) return yield* Effect.fail(scimFail.unsupportedMediaType())
  // read ahead by platform/Body.ts, which holds the 1 MiB limit however the body is framed
  const text = yield* request.text.pipe(Effect.mapError(() => scimFail.badRequest("invalidSyntax", "The body could not be read")))
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return yield* Effect.fail(scimFail.badRequest("invalidSyntax", "The body is not valid JSON"))
  }
  if (tooDeep(parsed, MAX_DEPTH)) return yield* Effect.fail(scimFail.badRequest("invalidSyntax", `The body nests deeper than ${MAX_DEPTH} levels`))
  return parsed
})

/** the developer whose SCIM token the gate accepted (or, with the gate off in benchmarks, this lookup) */
const scimDeveloper = Effect.gen(function*() {
  const gate = yield* FiberRef.get(CurrentGate)
  if (gate?.developer !== undefined && gate.scimTokenId !== undefined) return gate.developer.id
  const request = yield* HttpServerRequest.HttpServerRequest
  const bearer = bearerOf(request.headers["authorization"])
  const resolver = yield* ScimTokenResolver
  const resolved = bearer === undefined ? undefined : yield* resolver.resolve(bearer)
  if (resolved === undefined) return yield* Effect.fail(new ScimError({ status: 401, detail: "Invalid or missing SCIM token" }))
  return resolved.developer.id
})

const query = Effect.map(HttpServerRequest.HttpServerRequest, (request) => {
  const q = request.url.indexOf("?")
  const params = new URLSearchParams(q === -1 ? "" : request.url.slice(q + 1))
  const get = (name: string) => {
    for (const [k, v] of params) if (k.toLowerCase() === name.toLowerCase()) return v
    return undefined
  }
  return {
    filter: get("filter"),
    startIndex: get("startIndex"),
    count: get("count"),
    attributes: get("attributes"),
    excludedAttributes: get("excludedAttributes")
  }
})

const header = (name: string) => Effect.map(HttpServerRequest.HttpServerRequest, (r) => r.headers[name])

/** a single resource with its ETag; 304 when If-None-Match names its version */
const single = (resource: Record<string, unknown>, version: number, status = 200, extra: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const etag = etagOf(version)
    const ifNoneMatch = versionsIn(yield* header("if-none-match"))
    if (status === 200 && ifNoneMatch !== undefined && (ifNoneMatch.includes("*") || ifNoneMatch.includes(String(version)))) {
      return HttpServerResponse.empty({ status: 304, headers: { etag } })
    }
    const q = yield* query
    return scimJson(project(resource, q.attributes, q.excludedAttributes), status, { etag, ...extra })
  })

const scim = <R>(effect: Effect.Effect<HttpServerResponse.HttpServerResponse, ScimError, R>) =>
  effect.pipe(Effect.catchTag("ScimError", (e) => Effect.succeed(scimErrorResponse(e))))

export const ScimTokensHttp = HttpApiBuilder.group(Api, "scimTokens", (handlers) =>
  Effect.gen(function*() {
    const directory = yield* Directory
    return handlers
      .handle("createToken", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => directory.createToken(d.id, payload)))
      .handle("listTokens", () => Effect.flatMap(CurrentDeveloper, (d) => directory.listTokens(d.id)))
      .handle("deleteToken", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => directory.deleteToken(d.id, path.id)).pipe(Effect.as(HttpServerResponse.empty({ status: 204 }))))
      .handle("getSettings", () => Effect.flatMap(CurrentDeveloper, (d) => directory.getSettings(d.id)))
      .handle("updateSettings", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => directory.updateSettings(d.id, payload)))
  }))

// a schema URN may arrive percent-encoded once more than the router decodes; a lone "%" is just not found
const decodedOnce = (id: string) => {
  try {
    return decodeURIComponent(id)
  } catch {
    return id
  }
}

export const ScimHttp = HttpApiBuilder.group(Api, "scim", (handlers) =>
  Effect.gen(function*() {
    const directory = yield* Directory
    const groups = yield* Groups
    const base = (yield* Config).publicBaseUrl
    const user = (row: Parameters<typeof userView>[0], status = 200) =>
      single(userView(row, base), row.version, status, status === 201 ? { location: `${base}/scim/v2/Users/${row.id}` } : {})
    const group = (g: GroupWithMembers, status = 200) =>
      single(groupView(g.row, base, g.members), g.row.version, status, status === 201 ? { location: `${base}/scim/v2/Groups/${g.row.id}` } : {})
    const withMembers = Effect.map(query, (q) => !excludes(q.excludedAttributes, "members"))
    // discovery is public (no token, no developer): it describes the service, not a tenant
    const discovery = (body: unknown) => scim(Effect.succeed(scimJson(body)))
    const lookup = <T extends { id: string }>(list: ReadonlyArray<T>, id: string) =>
      scim(Effect.suspend(() => {
        const found = list.find((x) => x.id.toLowerCase() === id.toLowerCase())
        return found ? Effect.succeed(scimJson(found)) : Effect.fail(scimFail.notFound())
      }))
    return handlers
      .handleRaw("serviceProviderConfig", () => discovery(serviceProviderConfig(base)))
      .handleRaw("resourceTypes", () => discovery(listResponse(2, 1, resourceTypes(base))))
      .handleRaw("resourceType", ({ path }) => lookup(resourceTypes(base), path.id))
      .handleRaw("schemas", () => discovery(listResponse(4, 1, schemas(base))))
      .handleRaw("schema", ({ path }) => lookup(schemas(base), decodedOnce(path.id)))
      .handleRaw("listUsers", () =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          const q = yield* query
          const { total, startIndex, rows } = yield* directory.listUsers(developerId, q)
          return scimJson(listResponse(total, startIndex, rows.map((r) => project(userView(r, base), q.attributes, q.excludedAttributes))))
        })))
      .handleRaw("createUser", () =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          return yield* user(yield* directory.createUser(developerId, yield* readBody), 201)
        })))
      .handleRaw("getUser", ({ path }) => scim(Effect.flatMap(scimDeveloper, (d) => Effect.flatMap(directory.getUser(d, path.id), (r) => user(r)))))
      .handleRaw("replaceUser", ({ path }) =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          return yield* user(yield* directory.replaceUser(developerId, path.id, yield* readBody, yield* header("if-match")))
        })))
      .handleRaw("patchUser", ({ path }) =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          return yield* user(yield* directory.patchUser(developerId, path.id, yield* readBody, yield* header("if-match")))
        })))
      .handleRaw("deleteUser", ({ path }) =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          yield* directory.deleteUser(developerId, path.id, yield* header("if-match"))
          return HttpServerResponse.empty({ status: 204 })
        })))
      .handleRaw("listGroups", () =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          const q = yield* query
          const { total, startIndex, groups: found } = yield* groups.list(developerId, q, yield* withMembers)
          return scimJson(listResponse(total, startIndex, found.map((g) => project(groupView(g.row, base, g.members), q.attributes, q.excludedAttributes))))
        })))
      .handleRaw("createGroup", () =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          return yield* group(yield* groups.create(developerId, yield* readBody), 201)
        })))
      .handleRaw("getGroup", ({ path }) =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          return yield* group(yield* groups.get(developerId, path.id, yield* withMembers))
        })))
      .handleRaw("replaceGroup", ({ path }) =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          return yield* group(yield* groups.replace(developerId, path.id, yield* readBody, yield* header("if-match")))
        })))
      .handleRaw("patchGroup", ({ path }) =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          return yield* group(yield* groups.patch(developerId, path.id, yield* readBody, yield* header("if-match"), yield* withMembers))
        })))
      .handleRaw("deleteGroup", ({ path }) =>
        scim(Effect.gen(function*() {
          const developerId = yield* scimDeveloper
          yield* groups.remove(developerId, path.id, yield* header("if-match"))
          return HttpServerResponse.empty({ status: 204 })
        })))
  }))
