import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { developerView, DevelopersService } from "./Service.ts"

export const DevelopersHttp = HttpApiBuilder.group(Api, "developers", (handlers) =>
  Effect.gen(function*() {
    const service = yield* DevelopersService
    return handlers
      .handle("signup", ({ payload }) =>
        Effect.map(service.signup(payload), ({ developer, apiKey }) => ({ ...developerView(developer), apiKey })))
      .handle("me", () => Effect.map(CurrentDeveloper, developerView))
      .handle("updateMe", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (developer) => Effect.map(service.update(developer, payload), developerView)))
      .handle("rotateKey", () => Effect.flatMap(CurrentDeveloper, service.rotateKey))
  }))
