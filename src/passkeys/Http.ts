import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest } from "../platform/Errors.ts"
import { Passkeys } from "./Service.ts"

export const PasskeysHttp = HttpApiBuilder.group(Api, "passkeys", (handlers) =>
  Effect.gen(function*() {
    const passkeys = yield* Passkeys
    return handlers
      .handle("registerOptions", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => passkeys.registrationOptions(d.id, payload.principalId)))
      .handle("registerVerify", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => passkeys.verifyRegistration(d.id, payload)))
      .handle("listCredentials", ({ urlParams }) =>
        Effect.flatMap(CurrentDeveloper, (d) =>
          urlParams.principalId === undefined || urlParams.principalId === ""
            ? Effect.fail(new BadRequest({ message: "principalId is required", details: [{ path: "principalId", message: "is required" }] }))
            : passkeys.listCredentials(d.id, urlParams.principalId)))
      .handle("deleteCredential", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => passkeys.deleteCredential(d.id, path.id)).pipe(
          Effect.as(HttpServerResponse.empty({ status: 204 }))
        ))
      .handle("assertOptions", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => passkeys.assertionOptions(d.id, payload.authRequestId)))
      .handle("assertVerify", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => passkeys.verifyAssertion(d.id, payload)))
  }))
