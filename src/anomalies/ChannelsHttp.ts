import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest } from "../platform/Errors.ts"
import { pageLimit } from "../platform/Pagination.ts"
import { AnomalyChannels } from "./Channels.ts"

export const AnomalyChannelsHttp = HttpApiBuilder.group(Api, "anomalyChannels", (handlers) =>
  Effect.gen(function*() {
    const channels = yield* AnomalyChannels
    const withDeveloper = <A, E>(f: (developerId: string) => Effect.Effect<A, E>) => Effect.flatMap(CurrentDeveloper, (d) => f(d.id))
    return handlers
      .handle("create", ({ payload }) => withDeveloper((d) => channels.create(d, payload)))
      .handle("list", () => withDeveloper(channels.list))
      .handle("remove", ({ path }) => withDeveloper((d) => Effect.as(channels.remove(d, path.id), HttpServerResponse.empty({ status: 204 }))))
      .handle("deliveries", ({ path, urlParams }) =>
        withDeveloper((d) => {
          const limit = pageLimit(urlParams.limit)
          if (limit === undefined) return Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 100" }))
          return channels.deliveries(d, path.id, { ...urlParams, limit })
        }))
  }))
