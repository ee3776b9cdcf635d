import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { Api } from "../Api.ts"
import { CurrentDeveloper } from "../platform/Auth.ts"
import { BadRequest, NotFound } from "../platform/Errors.ts"
import { EVENT_TYPES } from "../platform/Events.ts"
import { TooManyConnections } from "./Api.ts"
import { EventStreams, MAX_STREAMS_PER_DEVELOPER } from "./Stream.ts"

const KNOWN: ReadonlySet<string> = new Set(EVENT_TYPES)

export const EventsHttp = HttpApiBuilder.group(Api, "events", (handlers) =>
  Effect.gen(function*() {
    const streams = yield* EventStreams
    return handlers
      .handle("get", ({ path }) =>
        Effect.flatMap(CurrentDeveloper, (developer) =>
          Effect.flatMap(streams.get(developer.id, path.id), (event) =>
            event === undefined ? Effect.fail(new NotFound({ message: "No such event" })) : Effect.succeed(event))))
      .handle("stream", ({ urlParams, headers }) =>
      Effect.gen(function*() {
        const developer = yield* CurrentDeveloper
        const types = urlParams.types === undefined || urlParams.types.trim() === ""
          ? undefined
          : urlParams.types.split(",").map((t) => t.trim()).filter((t) => t !== "")
        const unknown = types?.filter((t) => !KNOWN.has(t)) ?? []
        if (unknown.length > 0) {
          return yield* Effect.fail(new BadRequest({ message: `Unknown event type(s): ${unknown.join(", ")}; valid: ${EVENT_TYPES.join(", ")}` }))
        }
        const lastEventId = headers["last-event-id"]?.trim()
        const opened = yield* streams.open(developer.id, { lastEventId: lastEventId === "" ? undefined : lastEventId, types })
        if (opened === undefined) {
          return yield* Effect.fail(new TooManyConnections({ message: `At most ${MAX_STREAMS_PER_DEVELOPER} event streams may be open at once; close one first` }))
        }
        return HttpServerResponse.stream(opened.stream, {
          contentType: "text/event-stream",
          headers: { "cache-control": "no-store", "x-accel-buffering": "no" }
        })
      }))
  }))
