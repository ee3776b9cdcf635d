import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const GrantsHttp = HttpApiBuilder.group(Api, "grants", (handlers) => handlers)
