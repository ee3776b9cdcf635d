/**
 * Anomaly alert channels (decisions §14). A channel is a row of webhook_endpoints of kind
 * `anomaly_webhook` or `anomaly_slack` (sql/0027), so the webhook delivery worker sends to it with
 * everything endpoints have: signatures, retries with backoff, SSRF checks with pinning at each
 * send, fair claims and per-endpoint caps, and delivery records. Which channels receive an alert is
 * decided in the outbox insert by the SQL function `anomaly_alert_channels`. Secrets: a webhook
 * channel's signing secret is shown once, at creation; a Slack channel's URL (itself a secret) is
 * stored sealed and only ever answered masked.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Config } from "../Config.ts"
import { BadRequest, ChannelTypeUnsupported, NotFound, TooManyChannels } from "../platform/Errors.ts"
import { newId } from "../platform/Ids.ts"
import { checkReceiverName, checkReceiverUrl } from "../platform/Outbound.ts"
import { nowMillis } from "../platform/Time.ts"
import { VaultKeys, VaultKeysLive } from "../vault/Crypto.ts"
import { type DeliveryQuery, deliveryPage, type DeliveryView, type EndpointKind, retireEndpoint } from "../webhooks/History.ts"
import { newSecret, sealEndpointSecret } from "../webhooks/Service.ts"
import { SECRET_PREFIX } from "../webhooks/Delivery.ts"
import { SEVERITIES } from "./ChannelsApi.ts"

/** the most channels one developer may keep */
export const MAX_CHANNELS = 20
const CHANNEL_KINDS: ReadonlyArray<EndpointKind> = ["anomaly_webhook", "anomaly_slack"]
const MASK = "********"

interface ChannelRow {
  readonly id: string
  readonly kind: "anomaly_webhook" | "anomaly_slack"
  readonly name: string | null
  readonly url: string
  readonly severities: ReadonlyArray<string> | null
  readonly createdAt: Date
}

export interface ChannelView {
  readonly id: string
  readonly type: "webhook" | "slack"
  readonly name: string | null
  readonly url: string
  readonly severities: ReadonlyArray<string>
  readonly secret: string | null
  readonly createdAt: string
}

/** every answer but the creation one: a webhook channel's secret masked (a Slack URL is stored masked) */
const channelView = (row: ChannelRow, secret?: string): ChannelView => ({
  id: row.id,
  type: row.kind === "anomaly_slack" ? "slack" : "webhook",
  name: row.name,
  url: row.url,
  severities: row.severities ?? [...SEVERITIES],
  secret: row.kind === "anomaly_slack" ? null : secret ?? `${SECRET_PREFIX}${MASK}`,
  createdAt: row.createdAt.toISOString()
})

/** a Slack incoming-webhook URL shown without its secret path: the origin only */
export const maskUrl = (url: URL) => `${url.origin}/${MASK}`

export interface CreateChannelInput {
  readonly type: string
  readonly url?: string | undefined
  readonly config?: { readonly url: string } | undefined
  readonly name?: string | undefined
  readonly severities?: ReadonlyArray<string> | undefined
}

export interface AnomalyChannelsService {
  readonly create: (developerId: string, input: CreateChannelInput) => Effect.Effect<ChannelView, BadRequest | TooManyChannels | ChannelTypeUnsupported>
  readonly list: (developerId: string) => Effect.Effect<{ channels: Array<ChannelView> }>
  readonly remove: (developerId: string, id: string) => Effect.Effect<void, NotFound>
  readonly deliveries: (developerId: string, id: string, query: DeliveryQuery) => Effect.Effect<
    { deliveries: Array<DeliveryView>; nextCursor: string | null },
    NotFound | BadRequest
  >
  /** of these ids, the developer's live channels (for checking a custom rule's alertChannels) */
  readonly ownedIds: (developerId: string, ids: ReadonlyArray<string>) => Effect.Effect<ReadonlyArray<string>>
}

export class AnomalyChannels extends Context.Tag("agent-auth/AnomalyChannels")<AnomalyChannels, AnomalyChannelsService>() {}

const COLUMNS = "id, kind, name, url, severities, created_at"

export const AnomalyChannelsServiceLive = Layer.effect(
  AnomalyChannels,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const ring = yield* VaultKeys
    const notFound = () => new NotFound({ message: "Channel not found" })

    /** the type and URL of a request, checked in this order: type, one URL, the outbound rules */
    const target = (input: CreateChannelInput) => {
      if (input.type === "email") {
        return Effect.fail(new ChannelTypeUnsupported({ message: "email channels are not supported; use a webhook or slack channel" }))
      }
      if (input.type !== "webhook" && input.type !== "slack") {
        return Effect.fail(new BadRequest({ message: "type must be webhook or slack" }))
      }
      const raw = input.url ?? input.config?.url
      if (raw === undefined || (input.url !== undefined && input.config !== undefined)) {
        return Effect.fail(new BadRequest({ message: "give the channel's url once: as url, or as config.url" }))
      }
      // the same rules as webhook endpoints; each send checks and pins the address again
      const check = checkReceiverUrl(raw, config.webhooks.allowPrivateHosts)
      if (!check.ok) return Effect.fail(new BadRequest({ message: check.reason }))
      const kind = input.type === "slack" ? "anomaly_slack" as const : "anomaly_webhook" as const
      return Effect.flatMap(Effect.promise(() => checkReceiverName(check.url, config.webhooks.allowPrivateHosts)), (named) =>
        named.ok ? Effect.succeed({ kind, raw, url: named.url }) : Effect.fail(new BadRequest({ message: named.reason })))
    }

    return {
      create: (developerId, input) =>
        Effect.gen(function*() {
          const { kind, raw, url } = yield* target(input)
          const ms = yield* nowMillis
          const id = newId("achan", ms)
          // a webhook channel signs with its own secret; a Slack channel's secret is its URL
          const secret = kind === "anomaly_slack" ? raw : newSecret()
          const shownUrl = kind === "anomaly_slack" ? maskUrl(url) : raw
          const severities = input.severities === undefined ? null : SEVERITIES.filter((s) => input.severities!.includes(s))
          const row = yield* sql.withTransaction(Effect.gen(function*() {
            // the developer's row lock makes concurrent registrations count one after another
            yield* sql`SELECT id FROM developers WHERE id = ${developerId} FOR UPDATE`
            const [{ n }] = (yield* sql<{ n: number }>`
              SELECT count(*)::int AS n FROM webhook_endpoints
              WHERE developer_id = ${developerId} AND kind IN ${sql.in(CHANNEL_KINDS)} AND deleted_at IS NULL`) as unknown as [{ n: number }]
            if (n >= MAX_CHANNELS) {
              return yield* Effect.fail(new TooManyChannels({ message: `A developer may have at most ${MAX_CHANNELS} anomaly channels; delete one first` }))
            }
            const [row] = yield* sql<ChannelRow>`
              INSERT INTO webhook_endpoints (id, developer_id, url, events, secret_ciphertext, created_at, kind, name, severities)
              VALUES (${id}, ${developerId}, ${shownUrl}, ${["anomaly.detected"] as any}, ${sealEndpointSecret(ring, id, developerId, secret)},
                      ${new Date(ms)}, ${kind}, ${input.name ?? null}, ${severities as any})
              RETURNING ${sql.literal(COLUMNS)}`
            return row!
          })).pipe(Effect.catchTag("SqlError", Effect.die))
          return channelView(row, kind === "anomaly_webhook" ? secret : undefined)
        }),
      list: (developerId) =>
        sql<ChannelRow>`SELECT ${sql.literal(COLUMNS)} FROM webhook_endpoints
                        WHERE developer_id = ${developerId} AND kind IN ${sql.in(CHANNEL_KINDS)} AND deleted_at IS NULL
                        ORDER BY created_at DESC, id DESC`.pipe(
          Effect.orDie,
          Effect.map((rows) => ({ channels: rows.map((row) => channelView(row)) }))
        ),
      remove: (developerId, id) =>
        Effect.gen(function*() {
          const ms = yield* nowMillis
          if (!(yield* retireEndpoint(sql, developerId, id, CHANNEL_KINDS, new Date(ms)))) return yield* Effect.fail(notFound())
        }),
      deliveries: (developerId, id, query) =>
        Effect.gen(function*() {
          const [own] = yield* sql`SELECT id FROM webhook_endpoints
                                   WHERE id = ${id} AND developer_id = ${developerId} AND kind IN ${sql.in(CHANNEL_KINDS)} AND deleted_at IS NULL`.pipe(Effect.orDie)
          if (own === undefined) return yield* Effect.fail(notFound())
          return yield* deliveryPage(sql, id, query)
        }),
      ownedIds: (developerId, ids) =>
        ids.length === 0 ? Effect.succeed([]) : sql<{ id: string }>`SELECT id FROM webhook_endpoints
            WHERE id IN ${sql.in(ids)} AND developer_id = ${developerId} AND kind IN ${sql.in(CHANNEL_KINDS)} AND deleted_at IS NULL`.pipe(
          Effect.orDie,
          Effect.map((rows) => rows.map((r) => r.id))
        )
    }
  })
)

export const AnomalyChannelsLive = AnomalyChannelsServiceLive.pipe(Layer.provide(VaultKeysLive))
