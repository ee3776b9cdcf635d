import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const BreachesHttp = HttpApiBuilder.group(Api, "breaches", (handlers) => handlers)
