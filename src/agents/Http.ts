import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const AgentsHttp = HttpApiBuilder.group(Api, "agents", (handlers) => handlers)
