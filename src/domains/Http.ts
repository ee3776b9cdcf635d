import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const DomainsHttp = HttpApiBuilder.group(Api, "domains", (handlers) => handlers)
