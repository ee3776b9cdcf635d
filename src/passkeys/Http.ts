import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest } from "../platform/Errors.ts"
import { pageParams } from "../platform/Pagination.ts"
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
            : Effect.flatMap(pageParams(urlParams), (page) => passkeys.listCredentials(d.id, urlParams.principalId!, page))))
      .handle("getCredential", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => passkeys.getCredential(d.id, path.id)))
      .handle("renameCredential", ({ path, payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => passkeys.renameCredential(d.id, path.id, payload.deviceName)))
      .handle("signal", ({ urlParams }) =>
        Effect.flatMap(CurrentDeveloper, (d) =>
          urlParams.principalId === undefined || urlParams.principalId === ""
            ? Effect.fail(new BadRequest({ message: "principalId is required", details: [{ path: "principalId", message: "is required" }] }))
            : Effect.map(passkeys.signal(d.id, urlParams.principalId, { create: true }), (info) => info!)))
      .handle("getPolicy", () => Effect.flatMap(CurrentDeveloper, (d) => passkeys.getPolicy(d.id)))
      .handle("putPolicy", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => passkeys.putPolicy(d.id, payload)))
      .handle("deleteCredential", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => passkeys.deleteCredential(d.id, path.id)).pipe(
          Effect.as(HttpServerResponse.empty({ status: 204 }))
        ))
      .handle("assertOptions", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => passkeys.assertionOptions(d.id, payload.authRequestId)))
      .handle("assertVerify", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => passkeys.verifyAssertion(d.id, payload)))
  }))
