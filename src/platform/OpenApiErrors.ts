/**
 * The error responses of the OpenAPI document as the wire has them. The platform declares its own
 * schema-decode error (HttpApiDecodeError) at 400 on every operation; the envelope answers it as the
 * operation's validation code (INVALID_REQUEST or BAD_REQUEST, decisions §1), so the document says
 * that instead, drops the 400 where nothing can be decoded (no body, no query), drops the API-key
 * middleware's 403 INSUFFICIENT_KEY_SCOPE where a `read` key may call (decisions §2), and describes
 * each error status by the codes it can carry.
 */
import { readKeyMayCall } from "./Auth.ts"
import { validationCode } from "./HttpEnvelope.ts"

const REF = "#/components/schemas/"
const DECODE_ERROR = `${REF}HttpApiDecodeError`
const KEY_SCOPE_ERROR = `${REF}InsufficientKeyScope`
const PLATFORM_SCHEMAS = ["HttpApiDecodeError", "Issue", "PropertyKey"]

const tagOf = (code: string) => code.toLowerCase().split("_").map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join("")

export const documentErrors = (spec: Record<string, any>): Record<string, any> => {
  const schemas: Record<string, any> = spec.components?.schemas ?? {}
  const codeOf = (ref: string): string | undefined => schemas[ref.slice(REF.length)]?.properties?.code?.enum?.[0]
  for (const [path, item] of Object.entries<Record<string, any>>(spec.paths ?? {})) {
    for (const [method, operation] of Object.entries<any>(item)) {
      const responses: Record<string, any> | undefined = operation?.responses
      if (responses === undefined) continue
      const readKeyMay = readKeyMayCall(method.toUpperCase(), path)
      const decodes = operation.requestBody !== undefined ||
        (operation.parameters ?? []).some((p: { in?: string }) => p.in === "query")
      for (const [status, response] of Object.entries<any>(responses)) {
        if (Number(status) < 400) continue
        const content = response?.content?.["application/json"]
        if (content?.schema === undefined) continue
        const members: Array<any> = content.schema.anyOf ?? [content.schema]
        const refs: Array<string> = []
        for (const member of members) {
          let ref: string | undefined = member.$ref
          if (ref === DECODE_ERROR) {
            if (!decodes) continue
            ref = `${REF}${tagOf(validationCode(path))}`
          }
          if (ref === KEY_SCOPE_ERROR && readKeyMay) continue
          if (ref !== undefined && !refs.includes(ref)) refs.push(ref)
        }
        if (refs.length === 0) {
          delete responses[status]
          continue
        }
        content.schema = refs.length === 1 ? { $ref: refs[0] } : { anyOf: refs.map(($ref) => ({ $ref })) }
        const codes = refs.map(codeOf).filter((c) => c !== undefined)
        if (codes.length > 0) response.description = codes.join(" or ")
      }
    }
  }
  for (const name of PLATFORM_SCHEMAS) delete schemas[name]
  return spec
}
