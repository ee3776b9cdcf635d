import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { err } from "../platform/Errors.ts"
import { decodeCursor, pageLimit, toPage } from "../platform/Pagination.ts"
import { Agents } from "./Service.ts"

export const AgentsHttp = HttpApiBuilder.group(Api, "agents", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.create(d.id, payload), agents.view)))
      .handle("list", ({ urlParams }) =>
        Effect.gen(function*() {
          const developer = yield* CurrentDeveloper
          // the interface's list page size: default 50, maximum 100 (decisions §1 for the cursor)
          const limit = pageLimit(urlParams.limit)
          if (limit === undefined) return yield* Effect.fail(err.badRequest("BAD_REQUEST", "limit must be an integer from 1 to 100"))
          const cursor = decodeCursor(urlParams.cursor)
          if (cursor === null) return yield* Effect.fail(err.badRequest("BAD_REQUEST", "cursor is not valid"))
          const { page, nextCursor } = toPage(yield* agents.list(developer.id, cursor, limit), limit)
          return { agents: page.map(agents.view), nextCursor }
        }))
      .handle("get", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.get(d.id, path.id), agents.view)))
      .handle("update", ({ path, payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.update(d.id, path.id, payload), agents.view)))
      .handle("remove", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.as(agents.remove(d.id, path.id), HttpServerResponse.empty({ status: 204 }))))
  }))
