/**
 * A test send (decisions §7, revised: `POST /v1/webhooks/:id/test`): one signed sample event sent
 * now, exactly as a delivery is sent (envelope, both signature schemes, the previous secret during a
 * rotation, the outbound rules, no redirects, the timeout), and its outcome answered. It is not an
 * event: nothing is written to the events or the delivery history, so a sample never shows up in
 * the history, a replay or an export, and it is not retried.
 */
import { Effect } from "effect"
import { Config } from "../Config.ts"
import type { EventType } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import { envelopeBody, send, signDelivery } from "./Delivery.ts"
import { SAMPLE_DATA } from "./Samples.ts"

export interface TestTarget {
  readonly url: string
  /** the endpoint's secrets, decrypted; undefined when they cannot be (the send then fails as a delivery would) */
  readonly secret: string | undefined
  readonly previousSecret: string | undefined
  readonly previousSecretExpiresAt: Date | null
}

export interface TestResult {
  readonly eventId: string
  readonly eventType: string
  readonly ok: boolean
  readonly responseStatus: number | null
  readonly error: string | null
}

export const sendTest = (target: TestTarget, eventType: EventType) =>
  Effect.gen(function*() {
    const config = yield* Config
    const ms = yield* nowMillis
    const eventId = newId("evt", ms)
    const result = (ok: boolean, responseStatus: number | null, error: string | null): TestResult => ({ eventId, eventType, ok, responseStatus, error })
    if (target.secret === undefined) return result(false, null, "webhook secret cannot be decrypted")
    const body = envelopeBody(eventId, eventType, new Date(ms), SAMPLE_DATA[eventType])
    const previous = target.previousSecretExpiresAt !== null && target.previousSecretExpiresAt.getTime() > ms ? target.previousSecret : undefined
    const headers = signDelivery(target.secret, eventId, body, Math.floor(ms / 1000), previous)
    const outcome = yield* Effect.promise(() =>
      send(target.url, body, headers, { timeoutMs: config.webhooks.timeoutSeconds * 1000, allowPrivateHosts: config.webhooks.allowPrivateHosts })
    )
    return outcome.ok ? result(true, outcome.status, null) : result(false, outcome.status, outcome.error)
  })
