import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { OfflineSync } from "./Service.ts"

export const OfflineSyncHttp = HttpApiBuilder.group(Api, "offlineSync", (handlers) =>
  Effect.gen(function*() {
    const service = yield* OfflineSync
    return handlers.handle("sync", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => service.sync(d.id, payload)))
  }))
