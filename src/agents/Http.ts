import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { Entitlements } from "../billing/Entitlements.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { pageParams, toPage } from "../platform/Pagination.ts"
import { Agents } from "./Service.ts"

export const AgentsHttp = HttpApiBuilder.group(Api, "agents", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    const entitlements = yield* Entitlements
    return handlers
      // decisions §16: the plan's agent cap (402 PLAN_LIMIT_EXCEEDED), counted in the creating transaction
      .handle("create", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.map(entitlements.withinCap(d, "agents", agents.create(d.id, payload)), agents.view)))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          const { limit, cursor } = yield* pageParams(urlParams)
          const { page, nextCursor } = toPage(yield* agents.list(developer.id, cursor, limit, urlParams.origin), limit)
          return { agents: page.map(agents.view), nextCursor }
        }))
      .handle("get", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.get(d.id, path.id), agents.view)))
      .handle("update", ({ path, payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.update(d.id, path.id, payload), agents.view)))
      .handle("remove", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.as(agents.remove(d.id, path.id), HttpServerResponse.empty({ status: 204 }))))
  }))
