import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { InvalidRequest } from "../platform/Errors.ts"
import { pageLimit } from "../platform/Pagination.ts"
import { ConsentBundles } from "./Service.ts"

export const ConsentBundlesHttp = HttpApiBuilder.group(Api, "consentBundles", (handlers) =>
  Effect.gen(function*() {
    const bundles = yield* ConsentBundles
    const withDeveloper = <A, E>(f: (developerId: string) => Effect.Effect<A, E>) => Effect.flatMap(CurrentDeveloper, (d) => f(d.id))
    return handlers
      // decisions §16, §20: a bundle makes a grant, so the gate counts the plan's active-grant cap (402)
      .handle("create", ({ payload }) => withDeveloper((d) => bundles.create(d, payload)))
      .handle("list", ({ urlParams }) =>
        withDeveloper((d) => {
          const limit = pageLimit(urlParams.limit)
          if (limit === undefined) return Effect.fail(new InvalidRequest({ message: "limit must be an integer from 1 to 100" }))
          return bundles.list(d, { ...urlParams, limit })
        }))
      .handle("get", ({ path }) => withDeveloper((d) => bundles.get(d, path.id)))
      .handle("revoke", ({ path }) => withDeveloper((d) => bundles.revoke(d, path.id)))
      .handle("revocationStatus", ({ path }) => withDeveloper((d) => bundles.revocationStatus(d, path.id)))
      .handle("refresh", ({ path }) => withDeveloper((d) => bundles.refresh(d, path.id)))
  }))
