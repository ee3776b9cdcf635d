import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const AuditHttp = HttpApiBuilder.group(Api, "audit", (handlers) => handlers)
