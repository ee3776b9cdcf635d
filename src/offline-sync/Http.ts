import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { OfflineSync } from "./Service.ts"

export const OfflineSyncHttp = HttpApiBuilder.group(Api, "offlineSync", (handlers) =>
  Effect.gen(function*() {
    const service = yield* OfflineSync
    return handlers.handle("sync", ({ payload, request }) =>
      Effect.gen(function*() {
        const developer = yield* CurrentDeveloper
        // the text the payload was parsed from (already read, so this costs no second read)
        const rawBody = yield* request.text.pipe(Effect.option)
        return yield* service.sync(developer.id, payload, rawBody._tag === "Some" ? rawBody.value : undefined)
      }))
  }))
