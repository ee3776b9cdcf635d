import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { SignupDisabled } from "../platform/Errors.ts"
import { developerView, DevelopersService } from "./Service.ts"

export const DevelopersHttp = HttpApiBuilder.group(Api, "developers", (handlers) =>
  Effect.gen(function*() {
    const service = yield* DevelopersService
    const config = yield* Config
    return handlers
      .handle("signup", ({ payload }) =>
        config.signupEnabled
          ? Effect.map(service.signup(payload), ({ developer, apiKey }) => ({ ...developerView(developer), apiKey }))
          : Effect.fail(new SignupDisabled({ message: "Sign-up is closed on this service; an operator creates developer accounts" })))
      .handle("me", () => Effect.map(CurrentDeveloper, developerView))
      .handle("updateMe", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (developer) => Effect.map(service.update(developer, payload), developerView)))
      .handle("rotateKey", () => Effect.flatMap(CurrentDeveloper, service.rotateKey))
  }))
