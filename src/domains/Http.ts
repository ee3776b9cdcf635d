import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { Domains } from "./Service.ts"

export const DomainsHttp = HttpApiBuilder.group(Api, "domains", (handlers) =>
  Effect.gen(function*() {
    const domains = yield* Domains
    return handlers
      .handle("list", () => Effect.flatMap(CurrentDeveloper, (d) => domains.list(d.id)))
      .handle("create", ({ payload }) => Effect.flatMap(CurrentDeveloper, (d) => domains.create(d.id, payload.domain)))
      .handle("verify", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => domains.verify(d.id, path.id)))
      .handle("remove", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => domains.remove(d.id, path.id)).pipe(Effect.as(HttpServerResponse.empty({ status: 204 }))))
  }))
