import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const PasskeysHttp = HttpApiBuilder.group(Api, "passkeys", (handlers) => handlers)
