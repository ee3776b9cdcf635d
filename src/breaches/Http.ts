import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest } from "../platform/Errors.ts"
import { pageLimit } from "../platform/Pagination.ts"
import { Breaches } from "./Service.ts"

export const BreachesHttp = HttpApiBuilder.group(Api, "breaches", (handlers) =>
  Effect.gen(function*() {
    const breaches = yield* Breaches
    const withDeveloper = <A, E>(f: (developerId: string) => Effect.Effect<A, E>) => Effect.flatMap(CurrentDeveloper, (d) => f(d.id))
    return handlers
      .handle("record", ({ payload }) => withDeveloper((d) => breaches.record(d, payload)))
      .handle("list", ({ urlParams }) =>
        withDeveloper((d) => {
          const limit = pageLimit(urlParams.limit)
          if (limit === undefined) return Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 100" }))
          return breaches.list(d, { ...urlParams, limit })
        }))
      .handle("get", ({ path }) => withDeveloper((d) => breaches.get(d, path.breachId)))
      .handle("update", ({ path, payload }) => withDeveloper((d) => breaches.update(d, path.breachId, payload)))
      .handle("intimate", ({ path, payload }) => withDeveloper((d) => breaches.intimate(d, path.breachId, payload) as any))
  }))
