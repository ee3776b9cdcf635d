import { HttpApiBuilder } from "@effect/platform"
import { Effect, Schema } from "effect"
import { Api } from "../Api.ts"
import { Config } from "../Config.ts"
import { callingKey, CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, SignupDisabled } from "../platform/Errors.ts"
import { RotateKeyBody } from "./Api.ts"
import { DeveloperKeys } from "./Keys.ts"
import { developerView, DevelopersService } from "./Service.ts"

const GRACE_RULE = "The body may hold only gracePeriodSeconds: a whole number of seconds from 0 to 86400"
/** the rotation's optional body: none (or empty) is an immediate rotation */
const rotateBody = (text: string) => {
  if (text.trim() === "") return Effect.succeed({} as typeof RotateKeyBody.Type)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    return Effect.fail(new BadRequest({ message: "Malformed request body" }))
  }
  return Schema.decodeUnknown(RotateKeyBody, { onExcessProperty: "error" })(parsed).pipe(
    Effect.mapError(() => new BadRequest({ message: GRACE_RULE, details: [{ path: "gracePeriodSeconds", message: GRACE_RULE }] }))
  )
}

export const DevelopersHttp = HttpApiBuilder.group(Api, "developers", (handlers) =>
  Effect.gen(function*() {
    const service = yield* DevelopersService
    const config = yield* Config
    const keys = yield* DeveloperKeys
    return handlers
      .handle("signup", ({ payload }) =>
        config.signupEnabled
          ? Effect.map(service.signup(payload), ({ developer, apiKey }) => ({ ...developerView(developer), apiKey }))
          : Effect.fail(new SignupDisabled({ message: "Sign-up is closed on this service; an operator creates developer accounts" })))
      .handle("me", () => Effect.map(CurrentDeveloper, developerView))
      .handle("updateMe", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (developer) => Effect.map(service.update(developer, payload), developerView)))
      .handle("createKey", ({ payload }) => Effect.flatMap(CurrentDeveloper, (developer) => keys.create(developer, payload)))
      .handle("listKeys", () => Effect.flatMap(CurrentDeveloper, keys.list))
      .handle("deleteKey", ({ path }) => Effect.flatMap(CurrentDeveloper, (developer) => keys.remove(developer, path.id)))
      .handle("rotateKey", ({ request }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const body = yield* rotateBody(yield* request.text.pipe(Effect.orElseSucceed(() => "")))
          return yield* keys.rotate(developer, yield* callingKey, body.gracePeriodSeconds ?? 0)
        }))
  }))
