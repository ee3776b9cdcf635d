import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest } from "../platform/Errors.ts"
import { decodeCursor, pageParams } from "../platform/Pagination.ts"
import { RECORD_PAGE } from "./Records.ts"
import { Dpdp } from "./Service.ts"

const withDeveloper = <A, E, R>(f: (developerId: string) => Effect.Effect<A, E, R>) => Effect.flatMap(CurrentDeveloper, (d) => f(d.id))

export const DpdpNoticesHttp = HttpApiBuilder.group(Api, "dpdpNotices", (handlers) =>
  Effect.gen(function*() {
    const { notices } = yield* Dpdp
    return handlers
      .handle("register", ({ payload }) => withDeveloper((d) => notices.register(d, payload)))
      .handle("list", ({ urlParams }) => withDeveloper((d) => Effect.flatMap(pageParams(urlParams), (page) => notices.list(d, page))))
      .handle("versions", ({ path }) => withDeveloper((d) => notices.versions(d, path.noticeId)))
      .handle("version", ({ path, urlParams }) => withDeveloper((d) => notices.version(d, path.noticeId, path.version, urlParams.language)))
      .handle("retire", ({ path }) => withDeveloper((d) => notices.retire(d, path.noticeId, path.version)))
  }))

export const DpdpRecordsHttp = HttpApiBuilder.group(Api, "dpdpRecords", (handlers) =>
  Effect.gen(function*() {
    const { records, withdrawal, nominations, erasure, settings } = yield* Dpdp
    return handlers
      .handle("create", ({ payload }) => withDeveloper((d) => records.create(d, payload)))
      .handle("list", ({ urlParams }) =>
        withDeveloper((d) =>
          Effect.flatMap(pageParams({ ...urlParams, limit: urlParams.limit ?? String(RECORD_PAGE) }), (page) =>
            records.list(d, { dataPrincipalId: urlParams.dataPrincipalId, grantId: urlParams.grantId, status: urlParams.status }, page.cursor, page.limit))
        ))
      .handle("get", ({ path }) => withDeveloper((d) => records.get(d, path.recordId)))
      .handle("withdraw", ({ path, payload }) => withDeveloper((d) => withdrawal.withdraw(d, path.recordId, payload)))
      .handle("principalRecords", ({ path, urlParams }) =>
        withDeveloper((d) => {
          const cursor = decodeCursor(urlParams.cursor)
          if (cursor === null) return Effect.fail(new BadRequest({ message: "cursor is not valid" }))
          return records.byPrincipal(d, path.principalId, cursor)
        }))
      .handle("setNomination", ({ path, payload }) => withDeveloper((d) => nominations.set(d, path.principalId, payload)))
      .handle("removeNomination", ({ path }) =>
        withDeveloper((d) => nominations.remove(d, path.principalId)).pipe(Effect.as(HttpServerResponse.empty({ status: 204 }))))
      .handle("settings", () => withDeveloper((d) => settings.get(d)))
      .handle("updateSettings", ({ payload }) => withDeveloper((d) => settings.update(d, payload)))
      // 201 for a new erasure, 200 for a repeat (the same requestId)
      .handle("erase", ({ path, request }) =>
        withDeveloper((d) =>
          Effect.flatMap(request.text.pipe(Effect.orElseSucceed(() => "")), (text) => {
            let body: unknown
            try {
              body = text.trim() === "" ? undefined : JSON.parse(text)
            } catch {
              return Effect.fail(new BadRequest({ message: "Malformed request body" }))
            }
            return erasure.request(d, path.principalId, body)
          })
        ).pipe(
          Effect.map((r) => HttpServerResponse.unsafeJson(r.body, { status: r.status }))))
      .handle("cancelErasure", ({ path }) =>
        withDeveloper((d) => erasure.cancel(d, path.requestId)).pipe(Effect.as(HttpServerResponse.empty({ status: 204 }))))
  }))

export const DpdpGrievancesHttp = HttpApiBuilder.group(Api, "dpdpGrievances", (handlers) =>
  Effect.gen(function*() {
    const { grievances } = yield* Dpdp
    return handlers
      .handle("file", ({ payload }) => withDeveloper((d) => grievances.file(d, payload)))
      .handle("list", ({ urlParams }) =>
        withDeveloper((d) =>
          Effect.flatMap(pageParams(urlParams), (page) =>
            grievances.list(d, {
              status: urlParams.status,
              dataPrincipalId: urlParams.dataPrincipalId,
              overdue: urlParams.overdue === undefined ? undefined : urlParams.overdue === "true"
            }, page.cursor, page.limit))
        ))
      .handle("get", ({ path }) => withDeveloper((d) => grievances.get(d, path.grievanceId)))
      .handle("update", ({ path, payload }) => withDeveloper((d) => grievances.update(d, path.grievanceId, payload)))
  }))
