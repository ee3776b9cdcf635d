import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const VaultHttp = HttpApiBuilder.group(Api, "vault", (handlers) => handlers)
