/**
 * Anomaly detection (decisions §14): the published endpoints (with cursors), settings, rules.
 * Channels (`/v1/anomaly/channels*`) are declared by their own group.
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | all with a body or filters | 400 | BAD_REQUEST | a field missing, of the wrong type or out of range; an unknown field (custom conditions too); a bad cursor, limit, window or date |
 * | createRule | 409 | CONFLICT | the ruleId exists (built-ins included); 50 custom rules already |
 * | deleteRule | 409 | CONFLICT | the rule is built in (disable it instead) |
 * | acknowledge, legacyAcknowledge | 409 | CONFLICT | moving backwards: acknowledging a resolved alert (the same status again answers the alert unchanged) |
 * | alert, acknowledge, legacyAcknowledge, resolve, updateRule, deleteRule | 404 | NOT_FOUND | no such alert or rule for this developer |
 * | all | 401 | UNAUTHORIZED | invalid or missing API key |
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, Conflict, NotFound } from "../platform/Errors.ts"
import { LimitParam } from "../platform/Pagination.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { HHMM, isTimeZone } from "../policies/Rules.ts"
import { Condition, strict, Text } from "./Rules.ts"
import { documented } from "../platform/OperationDocs.ts"
import { ANOMALIES_DOCS } from "./Docs.ts"

const Severity = Schema.Literal("low", "medium", "high", "critical")
const Response = Schema.Literal("alert", "suspend_agent", "revoke_grants")

export const Alert = Schema.Struct({
  alertId: Schema.String,
  ruleId: Schema.String,
  ruleName: Schema.String,
  severity: Severity,
  status: Schema.Literal("open", "acknowledged", "resolved"),
  agentId: Schema.NullOr(Schema.String),
  principalId: Schema.NullOr(Schema.String),
  occurrences: Schema.Number,
  firstSeenAt: Schema.String,
  lastSeenAt: Schema.String,
  detectedAt: Schema.String,
  description: Schema.String,
  context: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  response: Schema.Literal("none", "suspended_agent", "revoked_grants"),
  responseRefs: Schema.Array(Schema.String),
  acknowledgedAt: Schema.NullOr(Schema.String),
  resolvedAt: Schema.NullOr(Schema.String),
  note: Schema.NullOr(Schema.String)
})

/** the published `/v1/anomalies` shape (`id`, `type`, `metadata`) beside the alert's own fields */
export const LegacyAnomaly = Schema.Struct({
  ...Alert.fields,
  id: Schema.String,
  type: Schema.String,
  metadata: Schema.Record({ key: Schema.String, value: Schema.Unknown })
})

export const Rule = Schema.Struct({
  ruleId: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  builtIn: Schema.Boolean,
  inline: Schema.Boolean,
  enabled: Schema.Boolean,
  severity: Severity,
  response: Response,
  threshold: Schema.Record({ key: Schema.String, value: Schema.Number }),
  condition: Schema.NullOr(Schema.Unknown),
  alertChannels: Schema.Array(Schema.String),
  /** false for a custom rule the detection pass cannot count (event token.verified, groupBy ip) */
  evaluated: Schema.Boolean,
  createdAt: Schema.NullOr(Schema.String),
  updatedAt: Schema.NullOr(Schema.String)
})

const RuleId = Schema.String.pipe(Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$/, {
  message: () => "must be 1-64 letters, digits, '_', '.', ':' or '-'"
}))
const Channels = Schema.Array(Text(100)).pipe(Schema.maxItems(20))

export const CreateRule = Schema.Struct({
  ruleId: Schema.optional(RuleId),
  name: Text(200),
  description: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(1000)))),
  condition: Condition,
  severity: Schema.optional(Severity),
  response: Schema.optional(Response),
  alertChannels: Schema.optional(Channels),
  enabled: Schema.optional(Schema.Boolean)
}).annotations(strict)

export const UpdateRule = Schema.Struct({
  enabled: Schema.optional(Schema.Boolean),
  severity: Schema.optional(Severity),
  response: Schema.optional(Response),
  threshold: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Number.pipe(Schema.positive(), Schema.lessThanOrEqualTo(1_000_000)) })),
  alertChannels: Schema.optional(Channels),
  // custom rules only
  name: Schema.optional(Text(200)),
  description: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(1000)))),
  condition: Schema.optional(Condition)
}).annotations(strict)

export const OffHours = Schema.Struct({
  start: Schema.String.pipe(Schema.pattern(HHMM, { message: () => "must be HH:MM, 00:00 to 23:59" })),
  end: Schema.String.pipe(Schema.pattern(HHMM, { message: () => "must be HH:MM, 00:00 to 23:59" })),
  days: Schema.optional(Schema.Array(Schema.Int.pipe(Schema.between(1, 7, { message: () => "must be 1 (Monday) to 7 (Sunday)" })))
    .pipe(Schema.minItems(1), Schema.maxItems(7))),
  timeZone: Schema.optional(Schema.String.pipe(Schema.filter((tz) => isTimeZone(tz) || "must be an IANA time zone such as Europe/Paris")))
}).annotations(strict)

export const SettingsInput = Schema.Struct({
  mode: Schema.optional(Schema.Literal("off", "monitor", "enforce")),
  allowList: Schema.optional(Schema.Array(Text(64)).pipe(Schema.maxItems(100))),
  offHours: Schema.optional(Schema.NullOr(OffHours))
}).annotations(strict)

export const SettingsView = Schema.Struct({
  mode: Schema.Literal("off", "monitor", "enforce"),
  allowList: Schema.Array(Schema.String),
  offHours: Schema.NullOr(Schema.Struct({ start: Schema.String, end: Schema.String, days: Schema.Array(Schema.Number), timeZone: Schema.String })),
  updatedAt: Schema.NullOr(Schema.String)
})

const Note = Schema.Struct({ note: Schema.optional(Schema.String.pipe(Schema.maxLength(2000))) }).annotations(strict)
const IdPath = Schema.Struct({ id: Schema.String })
const RulePath = Schema.Struct({ ruleId: Schema.String })
const Page = { limit: LimitParam, cursor: Schema.optional(Schema.String) }

export const Metrics = Schema.Struct({
  window: Schema.Literal("1h", "6h", "24h"),
  total: Schema.Number,
  byStatus: Schema.Struct({ open: Schema.Number, acknowledged: Schema.Number, resolved: Schema.Number }),
  bySeverity: Schema.Struct({ critical: Schema.Number, high: Schema.Number, medium: Schema.Number, low: Schema.Number })
})

export class AnomaliesApi extends HttpApiGroup.make("anomalies")
  .add(
    HttpApiEndpoint.post("detect", "/v1/anomalies/detect")
      .addSuccess(Schema.Struct({
        detectedAt: Schema.String,
        total: Schema.Number,
        autoRevokedGrants: Schema.Number,
        anomalies: Schema.Array(LegacyAnomaly)
      }))
      // as published: 30 a minute
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.get("legacyList", "/v1/anomalies")
      .setUrlParams(Schema.Struct({ ...Page, unacknowledged: Schema.optional(Schema.Literal("true", "false")) }))
      .addSuccess(Schema.Struct({ anomalies: Schema.Array(LegacyAnomaly), total: Schema.Number, nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.patch("legacyAcknowledge", "/v1/anomalies/:id/acknowledge")
      .setPath(IdPath)
      .addSuccess(LegacyAnomaly)
      .addError(NotFound)
      .addError(Conflict)
  )
  .add(
    HttpApiEndpoint.get("alerts", "/v1/anomaly/alerts")
      .setUrlParams(Schema.Struct({
        ...Page,
        status: Schema.optional(Schema.Literal("open", "acknowledged", "resolved")),
        severity: Schema.optional(Severity),
        agentId: Schema.optional(Schema.String),
        ruleId: Schema.optional(Schema.String),
        since: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ data: Schema.Array(Alert), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("alert", "/v1/anomaly/alerts/:id").setPath(IdPath).addSuccess(Alert).addError(NotFound))
  .add(
    HttpApiEndpoint.post("acknowledge", "/v1/anomaly/alerts/:id/acknowledge")
      .setPath(IdPath)
      .setPayload(Note)
      .addSuccess(Alert)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(Conflict)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.post("resolve", "/v1/anomaly/alerts/:id/resolve")
      .setPath(IdPath)
      .setPayload(Note)
      .addSuccess(Alert)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("metrics", "/v1/anomaly/metrics")
      .setUrlParams(Schema.Struct({ window: Schema.optional(Schema.Literal("1h", "6h", "24h")), agentId: Schema.optional(Schema.String) }))
      .addSuccess(Metrics)
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("rules", "/v1/anomaly/rules").addSuccess(Schema.Struct({ rules: Schema.Array(Rule) })))
  .add(
    HttpApiEndpoint.post("createRule", "/v1/anomaly/rules")
      .setPayload(CreateRule)
      .addSuccess(Rule, { status: 201 })
      .addError(BadRequest)
      .addError(Conflict)
      .addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.patch("updateRule", "/v1/anomaly/rules/:ruleId")
      .setPath(RulePath)
      .setPayload(UpdateRule)
      .addSuccess(Rule)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.del("deleteRule", "/v1/anomaly/rules/:ruleId")
      .setPath(RulePath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(Conflict)
      .addError(NotFound)
  )
  .add(HttpApiEndpoint.get("settings", "/v1/anomaly/settings").addSuccess(SettingsView))
  .add(
    HttpApiEndpoint.put("updateSettings", "/v1/anomaly/settings")
      .setPayload(SettingsInput)
      .addSuccess(SettingsView)
      .addError(BadRequest)
      .addError(BodyErrors)
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(ANOMALIES_DOCS))
{}
