import { HttpApiBuilder } from "@effect/platform"
import { Api } from "../Api.ts"

export const OfflineSyncHttp = HttpApiBuilder.group(Api, "offlineSync", (handlers) => handlers)
