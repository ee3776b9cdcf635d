/**
 * Makes the generated OpenAPI document explain itself (issue 17 item 2), as one transform after
 * documentErrors: readable group names with a description (Groups.ts), a summary, a description and
 * examples for every operation (each capability's Docs.ts, keyed by endpoint name and attached to
 * its group in its Api.ts; read back here from the groups, so an operation's key comes from the
 * endpoint's own method and path; an endpoint's own OpenApi.Summary / OpenApi.Description
 * annotations win), the bearer security schemes declared and attached, and the request bodies that
 * handlers check by hand typed for the document (Bodies.ts, Scim.ts). The platform's decoding is
 * untouched: nothing here changes what a request answers.
 */
import { HttpApi, type HttpApiGroup } from "@effect/platform"
import { Context, Option } from "effect"
import { type OperationDoc, OperationDocs } from "../platform/OperationDocs.ts"
import { BreachRecordBody, BreachUpdateBody, IntimationBody, jsonSchemaOf, OfflineSyncBody } from "./Bodies.ts"
import { GrievanceBody, GrievanceUpdateBody, NominationBody, NoticeBody, RecordBody, SettingsBody, WithdrawBody } from "../dpdp/Bodies.ts"
import { GROUPS, SECURED_BY, SECURITY_SCHEMES } from "./Groups.ts"
import { compileRoutes } from "../platform/RateLimit.ts"
import { documentHeaders } from "./Headers.ts"
import { documentScim, SCIM_BODIES, SCIM_PREFIX } from "./Scim.ts"
import { tidyDocument } from "./Tidy.ts"

/** an operation's key: its method and its path as the document writes it (`:id` → `{id}`, as OpenApi.fromApi does) */
export const operationKey = (method: string, path: string): string => `${method.toUpperCase()} ${path.replace(/:(\w+)\??/g, "{$1}")}`

/** every endpoint's documentation, by operation key, read from its group's OperationDocs annotation */
export const operationDocs = <Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(api: HttpApi.HttpApi<string, Groups, E, R>): ReadonlyMap<string, OperationDoc> => {
  const docs = new Map<string, OperationDoc>()
  HttpApi.reflect(api, {
    onGroup: () => {},
    onEndpoint: ({ group, endpoint }) => {
      const doc = Context.getOption(group.annotations, OperationDocs).pipe(Option.flatMapNullable((byName) => byName[endpoint.name]))
      if (Option.isSome(doc)) docs.set(operationKey(endpoint.method, endpoint.path), doc.value)
    }
  })
  return docs
}

/** bodies read by hand, typed here for the document only */
export const HAND_READ_BODIES: Record<string, Record<string, unknown>> = {
  "POST /v1/dpdp/breaches": jsonSchemaOf(BreachRecordBody),
  "PATCH /v1/dpdp/breaches/{breachId}": jsonSchemaOf(BreachUpdateBody),
  "POST /v1/dpdp/breaches/{breachId}/principal-intimations": jsonSchemaOf(IntimationBody),
  "POST /v1/audit/offline-sync": jsonSchemaOf(OfflineSyncBody),
  "POST /v1/dpdp/consent-notices": jsonSchemaOf(NoticeBody),
  "POST /v1/dpdp/consent-records": jsonSchemaOf(RecordBody),
  "POST /v1/dpdp/consent-records/{recordId}/withdraw": jsonSchemaOf(WithdrawBody),
  "POST /v1/dpdp/grievances": jsonSchemaOf(GrievanceBody),
  "PATCH /v1/dpdp/grievances/{grievanceId}": jsonSchemaOf(GrievanceUpdateBody),
  "PUT /v1/dpdp/data-principals/{principalId}/nomination": jsonSchemaOf(NominationBody),
  "PATCH /v1/dpdp/settings": jsonSchemaOf(SettingsBody),
  ...SCIM_BODIES
}

const METHODS = ["get", "post", "put", "patch", "delete"] as const

/** `spec` (the document OpenApi.fromApi made of `api`) with every operation's documentation merged in */
export const describeApi = <Groups extends HttpApiGroup.HttpApiGroup.Any, E, R>(
  api: HttpApi.HttpApi<string, Groups, E, R>,
  spec: Record<string, any>
): Record<string, any> => {
  const docs = operationDocs(api)
  spec.components ??= {}
  spec.components.securitySchemes = { ...SECURITY_SCHEMES, ...spec.components.securitySchemes }
  for (const [name, scheme] of Object.entries(SECURITY_SCHEMES)) Object.assign(spec.components.securitySchemes[name], scheme)
  const rename = (tag: string) => GROUPS[tag]?.name ?? tag
  spec.tags = (spec.tags ?? []).map((tag: { name: string; description?: string }) => {
    const group = GROUPS[tag.name]
    return group === undefined ? tag : { ...tag, name: group.name, description: tag.description ?? group.description }
  })
  for (const [path, item] of Object.entries<Record<string, any>>(spec.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method]
      if (op === undefined) continue
      const key = operationKey(method, path)
      if (Array.isArray(op.tags)) op.tags = op.tags.map(rename)
      const doc = docs.get(key)
      if (doc !== undefined) {
        op.summary ??= doc.summary
        // an endpoint's own description (e.g. the vault exchange's body note) comes after ours
        op.description = op.description === undefined ? doc.description : `${doc.description}\n\n${op.description}`
      }
      const handRead = HAND_READ_BODIES[key]
      if (handRead !== undefined) op.requestBody = { required: true, content: { "application/json": { schema: handRead } } }
      // the SCIM routes read their own bearer (a SCIM token) in the gate
      const scheme = SECURED_BY[key] ?? (path.startsWith("/scim/v2/") ? "scimToken" : undefined)
      if (scheme !== undefined) op.security = [{ [scheme]: [] }]
      if (path.startsWith(SCIM_PREFIX)) documentScim(spec, key, op)
      if (doc?.request !== undefined) for (const content of Object.values<any>(op.requestBody?.content ?? {})) content.example = doc.request
      const success = Object.entries<any>(op.responses ?? {}).find(([status]) => Number(status) >= 200 && Number(status) < 300)?.[1]
      if (doc?.responseType !== undefined && success?.content?.["application/json"] !== undefined) {
        success.content = { [doc.responseType]: success.content["application/json"] }
      }
      if (doc?.response !== undefined) for (const content of Object.values<any>(success?.content ?? {})) content.example = doc.response
    }
  }
  const routes = compileRoutes(api)
  const limited = new Set(routes.filter((r) => !r.policy.exempt).map((r) => operationKey(r.method, r.path)))
  const keyed = new Set(routes.filter((r) => r.apiKey).map((r) => operationKey(r.method, r.path)))
  documentHeaders(spec, limited, keyed, operationKey)
  return tidyDocument(spec, [{ url: "/", description: "the service that serves this document (its /openapi.json names its own address)" }])
}
