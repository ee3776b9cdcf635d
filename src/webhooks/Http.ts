import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest } from "../platform/Errors.ts"
import { pageLimit } from "../platform/Pagination.ts"
import { Webhooks } from "./Service.ts"

export const WebhooksHttp = HttpApiBuilder.group(Api, "webhooks", (handlers) =>
  Effect.gen(function*() {
    const webhooks = yield* Webhooks
    const withDeveloper = <A, E>(f: (developerId: string) => Effect.Effect<A, E>) => Effect.flatMap(CurrentDeveloper, (d) => f(d.id))
    return handlers
      .handle("create", ({ payload }) => withDeveloper((d) => webhooks.create(d, payload)))
      .handle("list", () => withDeveloper(webhooks.list))
      .handle("update", ({ path, payload }) => withDeveloper((d) => webhooks.update(d, path.id, payload)))
      .handle("test", ({ path, payload }) => withDeveloper((d) => webhooks.test(d, path.id, payload.eventType)))
      .handle("remove", ({ path }) => withDeveloper((d) => Effect.as(webhooks.remove(d, path.id), HttpServerResponse.empty({ status: 204 }))))
      .handle("deliveries", ({ path, urlParams }) =>
        withDeveloper((d) => {
          const limit = pageLimit(urlParams.limit)
          if (limit === undefined) return Effect.fail(new BadRequest({ message: "limit must be an integer from 1 to 100" }))
          return webhooks.deliveries(d, path.id, { ...urlParams, limit })
        }))
      .handle("retry", ({ path }) => withDeveloper((d) => webhooks.retry(d, path.id, path.deliveryId)))
      .handle("rotateSecret", ({ path }) => withDeveloper((d) => webhooks.rotateSecret(d, path.id)))
      .handle("replay", ({ path, payload }) => withDeveloper((d) => webhooks.replay(d, path.id, payload)))
  }))
