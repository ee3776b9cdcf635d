/**
 * Makes the generated OpenAPI document explain itself (issue 17 item 2), as one transform after
 * documentErrors: readable group names with a description (Groups.ts), a summary, a description and
 * examples for every operation (the tables in Operations*.ts, keyed "METHOD /path"; an endpoint's
 * own OpenApi.Summary / OpenApi.Description annotations win), the bearer security schemes declared
 * and attached, and the request bodies that handlers check by hand typed for the document
 * (Bodies.ts). The platform's decoding is untouched: nothing here changes what a request answers.
 */
import { BreachRecordBody, BreachUpdateBody, IntimationBody, jsonSchemaOf, OfflineSyncBody } from "./Bodies.ts"
import { GROUPS, SECURED_BY, SECURITY_SCHEMES } from "./Groups.ts"
import { ACCESS_OPERATIONS } from "./OperationsAccess.ts"
import { ANOMALY_OPERATIONS } from "./OperationsAnomalies.ts"
import { ANOMALY_CHANNEL_OPERATIONS } from "./OperationsAnomalyChannels.ts"
import { BILLING_OPERATIONS } from "./OperationsBilling.ts"
import { COMPLIANCE_OPERATIONS } from "./OperationsCompliance.ts"
import { DATA_OPERATIONS } from "./OperationsData.ts"
import { DIRECTORY_BODIES, DIRECTORY_OPERATIONS } from "./OperationsDirectory.ts"
import { PART_TWO_OPERATIONS } from "./OperationsPartTwo.ts"
import { POLICY_OPERATIONS } from "./OperationsPolicies.ts"
import { SAML_OPERATIONS } from "./OperationsSaml.ts"
import { PLATFORM_OPERATIONS } from "./OperationsPlatform.ts"
import { SSO_OPERATIONS } from "./OperationsSso.ts"
import { documentScim, SCIM_PREFIX } from "./Scim.ts"

export interface OperationDoc {
  readonly summary: string
  /** what it does, who calls it, the rules that surprise */
  readonly description: string
  /** an example request body (operations that read one) */
  readonly request?: unknown
  /** an example of the success answer's JSON body */
  readonly response?: unknown
  /** the success answer's media type when the handler answers another than the generated `application/json` */
  readonly responseType?: string
}

export const OPERATIONS: Record<string, OperationDoc> = {
  ...PLATFORM_OPERATIONS, ...ACCESS_OPERATIONS, ...DATA_OPERATIONS, ...PART_TWO_OPERATIONS, ...COMPLIANCE_OPERATIONS, ...DIRECTORY_OPERATIONS,
  ...POLICY_OPERATIONS, ...BILLING_OPERATIONS, ...SSO_OPERATIONS, ...SAML_OPERATIONS, ...ANOMALY_OPERATIONS, ...ANOMALY_CHANNEL_OPERATIONS
}

/** bodies read by hand, typed here for the document only */
const HAND_READ_BODIES: Record<string, Record<string, unknown>> = {
  "POST /v1/dpdp/breaches": jsonSchemaOf(BreachRecordBody),
  "PATCH /v1/dpdp/breaches/{breachId}": jsonSchemaOf(BreachUpdateBody),
  "POST /v1/dpdp/breaches/{breachId}/principal-intimations": jsonSchemaOf(IntimationBody),
  "POST /v1/audit/offline-sync": jsonSchemaOf(OfflineSyncBody),
  ...DIRECTORY_BODIES
}

const METHODS = ["get", "post", "put", "patch", "delete"] as const

export const describeApi = (spec: Record<string, any>): Record<string, any> => {
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
      const key = `${method.toUpperCase()} ${path}`
      if (Array.isArray(op.tags)) op.tags = op.tags.map(rename)
      const doc = OPERATIONS[key]
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
  return spec
}
