import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const AuthorizationHttp = HttpApiBuilder.group(Api, "authorization", (handlers) => handlers)
