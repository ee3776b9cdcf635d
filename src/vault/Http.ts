import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, FiberRef } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper, CurrentGate } from "../platform/Auth.ts"
import { Vault } from "./Service.ts"

export const VaultHttp = HttpApiBuilder.group(Api, "vault", (handlers) =>
  Effect.gen(function*() {
    const vault = yield* Vault
    return handlers
      .handle("store", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => vault.store(d.id, payload)))
      .handle("list", ({ urlParams }) => Effect.flatMap(CurrentDeveloper, (d) => vault.list(d.id, urlParams)))
      .handle("get", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => vault.get(d.id, path.id)))
      .handle("remove", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.as(vault.remove(d.id, path.id), HttpServerResponse.empty({ status: 204 }))))
      .handle("exchange", ({ request }) =>
        Effect.gen(function*() {
          // The gate verified the grant token (signature, iss, exp) and counted it; its claims are here.
          const gate = yield* FiberRef.get(CurrentGate)
          const rawBody = yield* request.text.pipe(Effect.orElseSucceed(() => ""))
          return yield* vault.exchange(gate?.grant, rawBody)
        }))
  }))
