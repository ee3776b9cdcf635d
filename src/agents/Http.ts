import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { Agents } from "./Service.ts"

export const AgentsHttp = HttpApiBuilder.group(Api, "agents", (handlers) =>
  Effect.gen(function*() {
    const agents = yield* Agents
    return handlers
      .handle("create", ({ payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.create(d.id, payload), agents.view)))
      .handle("list", () =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.list(d.id), (list) => ({ agents: list.map(agents.view) }))))
      .handle("get", ({ path }) => Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.get(d.id, path.id), agents.view)))
      .handle("update", ({ path, payload }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.map(agents.update(d.id, path.id, payload), agents.view)))
      .handle("remove", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (d) => Effect.as(agents.remove(d.id, path.id), HttpServerResponse.empty({ status: 204 }))))
  }))
