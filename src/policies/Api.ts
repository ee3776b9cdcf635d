/**
 * Policies (decisions §13): built-in rules, Cedar policy sets, a dry-run evaluation and the decision log.
 *
 * | Operation | Status | Code | Condition |
 * | - | - | - | - |
 * | create, update | 400 | BAD_REQUEST | a field missing, of the wrong type or out of range; an unknown field; one time bound without the other |
 * | create | 402 | PLAN_LIMIT_EXCEEDED | the plan's rule cap is reached (free 50, pro 500) |
 * | get, update, remove | 404 | NOT_FOUND | no such rule for this developer |
 * | sync | 400 | BAD_REQUEST | malformed body; `content` not base64 |
 * | sync | 422 | POLICY_INVALID | the set does not parse or validate against the schema; over 256 KiB or 500 policies; rego without OPA |
 * | bundles/active, activate | 404 | NOT_FOUND | no such (active) bundle |
 * | evaluate, decisions, list | 400 | BAD_REQUEST | malformed body, filter, limit or cursor |
 * | all | 401 | UNAUTHORIZED | invalid or missing API key |
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BadRequest, BodyErrors, NotFound, PlanLimitExceeded, PolicyInvalid } from "../platform/Errors.ts"
import { LimitParam } from "../platform/Pagination.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { ACTIONS, HHMM, isTimeZone } from "./Rules.ts"
import { documented } from "../platform/OperationDocs.ts"
import { POLICIES_DOCS } from "./Docs.ts"

const strict = { parseOptions: { onExcessProperty: "error" as const } }
const Text = (max: number) => Schema.String.pipe(Schema.minLength(1), Schema.maxLength(max))
const Hhmm = Schema.String.pipe(Schema.pattern(HHMM, { message: () => "must be HH:MM, 00:00 to 23:59" }))
const TimeZone = Schema.String.pipe(Schema.filter((tz) => isTimeZone(tz) || "must be an IANA time zone such as Europe/Paris"))
const Action = Schema.Literal(...ACTIONS)
const Day = Schema.Int.pipe(Schema.between(1, 7, { message: () => "must be 1 (Monday) to 7 (Sunday)" }))
const Priority = Schema.Int.pipe(Schema.between(-1_000_000, 1_000_000))

const ruleFields = {
  name: Text(200),
  description: Schema.optional(Schema.NullOr(Schema.String.pipe(Schema.maxLength(1000)))),
  effect: Schema.Literal("allow", "deny"),
  priority: Schema.optional(Priority),
  agentId: Schema.optional(Schema.NullOr(Text(100))),
  principalId: Schema.optional(Schema.NullOr(Text(256))),
  scopes: Schema.optional(Schema.NullOr(Schema.Array(Text(200)).pipe(Schema.minItems(1), Schema.maxItems(100)))),
  timeOfDayStart: Schema.optional(Schema.NullOr(Hhmm)),
  timeOfDayEnd: Schema.optional(Schema.NullOr(Hhmm)),
  daysOfWeek: Schema.optional(Schema.NullOr(Schema.Array(Day).pipe(Schema.minItems(1), Schema.maxItems(7)))),
  timeZone: Schema.optional(TimeZone),
  actions: Schema.optional(Schema.Array(Action).pipe(Schema.minItems(1), Schema.maxItems(ACTIONS.length))),
  principalGroups: Schema.optional(Schema.NullOr(Schema.Array(Text(256)).pipe(Schema.minItems(1), Schema.maxItems(100))))
}

export const CreatePolicy = Schema.Struct(ruleFields).annotations(strict)
export const UpdatePolicy = Schema.Struct({
  ...ruleFields,
  name: Schema.optional(ruleFields.name),
  effect: Schema.optional(ruleFields.effect)
}).annotations(strict)

export const Policy = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.NullOr(Schema.String),
  effect: Schema.Literal("allow", "deny"),
  priority: Schema.Number,
  agentId: Schema.NullOr(Schema.String),
  principalId: Schema.NullOr(Schema.String),
  scopes: Schema.NullOr(Schema.Array(Schema.String)),
  timeOfDayStart: Schema.NullOr(Schema.String),
  timeOfDayEnd: Schema.NullOr(Schema.String),
  daysOfWeek: Schema.NullOr(Schema.Array(Schema.Number)),
  timeZone: Schema.String,
  actions: Schema.Array(Schema.String),
  principalGroups: Schema.NullOr(Schema.Array(Schema.String)),
  createdAt: Schema.String,
  updatedAt: Schema.String
})

export const Bundle = Schema.Struct({
  bundleId: Schema.String,
  format: Schema.Literal("cedar", "rego"),
  version: Schema.String,
  sha256: Schema.String,
  policyCount: Schema.Number,
  active: Schema.Boolean,
  createdAt: Schema.String
})

export const SyncInput = Schema.Struct({
  format: Schema.Literal("cedar", "rego"),
  version: Text(100),
  content: Schema.String.pipe(Schema.minLength(1), Schema.maxLength(700_000)),
  fileCount: Schema.optional(Schema.Int.pipe(Schema.between(1, 1000))),
  activate: Schema.optional(Schema.Boolean)
}).annotations(strict)

export const EvaluateInput = Schema.Struct({
  action: Schema.optional(Action),
  agentId: Text(100),
  principalId: Text(256),
  scopes: Schema.Array(Text(200)).pipe(Schema.maxItems(100)),
  at: Schema.optional(Schema.String.pipe(Schema.filter((s) => !Number.isNaN(Date.parse(s)) || "must be an ISO 8601 time"))),
  request: Schema.optional(Schema.Struct({ ip: Schema.optional(Text(100)), userAgent: Schema.optional(Text(500)) }).annotations(strict)),
  grant: Schema.optional(Schema.Struct({
    id: Text(100),
    delegationDepth: Schema.Int.pipe(Schema.between(0, 100)),
    parentGrantId: Schema.optional(Schema.NullOr(Text(100)))
  }).annotations(strict)),
  principal: Schema.optional(Schema.Struct({
    active: Schema.optional(Schema.Boolean),
    groups: Schema.optional(Schema.Array(Text(256)).pipe(Schema.maxItems(100))),
    ssoVerified: Schema.optional(Schema.Boolean)
  }).annotations(strict)),
  // decisions §22.5: what an OAuth authorization adds to the context
  oauth: Schema.optional(Schema.Struct({
    resourceServerId: Text(100),
    resource: Text(2048),
    clientOrigin: Schema.Literal("api", "dcr", "cimd")
  }).annotations(strict))
}).annotations(strict)

const ErrorItem = Schema.Struct({ policyId: Schema.NullOr(Schema.String), message: Schema.String })

export const Evaluation = Schema.Struct({
  effect: Schema.NullOr(Schema.Literal("allow", "deny")),
  policyId: Schema.NullOr(Schema.String),
  determiningPolicies: Schema.Array(Schema.String),
  errors: Schema.Array(ErrorItem),
  evaluatedAt: Schema.String
})

export const DecisionView = Schema.Struct({
  decisionId: Schema.String,
  effect: Schema.String,
  action: Schema.String,
  agentId: Schema.NullOr(Schema.String),
  principalId: Schema.NullOr(Schema.String),
  scopes: Schema.Array(Schema.String),
  policyId: Schema.NullOr(Schema.String),
  determiningPolicies: Schema.Array(Schema.String),
  errors: Schema.Array(ErrorItem),
  grantId: Schema.NullOr(Schema.String),
  createdAt: Schema.String
})

const IdPath = Schema.Struct({ id: Schema.String })
const PageParams = { limit: LimitParam, cursor: Schema.optional(Schema.String) }

export class PoliciesApi extends HttpApiGroup.make("policies")
  .add(
    HttpApiEndpoint.post("create", "/v1/policies")
      .setPayload(CreatePolicy)
      .addSuccess(Policy, { status: 201 })
      .addError(BadRequest)
      .addError(PlanLimitExceeded)
      .addError(BodyErrors)
      // as published: policy writes are limited to 30 a minute per address
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.get("list", "/v1/policies")
      .setUrlParams(Schema.Struct(PageParams))
      .addSuccess(Schema.Struct({ policies: Schema.Array(Policy), total: Schema.Number, nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.post("sync", "/v1/policies/sync")
      .setPayload(SyncInput)
      .addSuccess(
        Schema.Struct({ ...Bundle.fields, fileCount: Schema.Number, activated: Schema.Boolean }),
        { status: 201 }
      )
      .addError(BadRequest)
      .addError(PolicyInvalid)
      .addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.get("bundles", "/v1/policies/bundles")
      .setUrlParams(Schema.Struct({ ...PageParams, format: Schema.optional(Schema.Literal("cedar", "rego")) }))
      .addSuccess(Schema.Struct({ bundles: Schema.Array(Bundle), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(
    HttpApiEndpoint.get("activeBundle", "/v1/policies/bundles/active")
      .setUrlParams(Schema.Struct({ format: Schema.optional(Schema.Literal("cedar", "rego")) }))
      .addSuccess(Bundle)
      .addError(BadRequest)
      .addError(NotFound)
  )
  .add(
    HttpApiEndpoint.post("activate", "/v1/policies/bundles/:id/activate")
      .setPath(IdPath)
      .addSuccess(Bundle)
      .addError(NotFound)
      .addError(PolicyInvalid)
  )
  .add(
    HttpApiEndpoint.post("evaluate", "/v1/policies/evaluate")
      .setPayload(EvaluateInput)
      .addSuccess(Evaluation)
      .addError(BadRequest)
      .addError(BodyErrors)
  )
  .add(
    HttpApiEndpoint.get("decisions", "/v1/policies/decisions")
      .setUrlParams(Schema.Struct({
        ...PageParams,
        effect: Schema.optional(Schema.Literal("allow", "deny")),
        agentId: Schema.optional(Schema.String),
        since: Schema.optional(Schema.String)
      }))
      .addSuccess(Schema.Struct({ decisions: Schema.Array(DecisionView), nextCursor: Schema.NullOr(Schema.String) }))
      .addError(BadRequest)
  )
  .add(HttpApiEndpoint.get("get", "/v1/policies/:id").setPath(IdPath).addSuccess(Policy).addError(NotFound))
  .add(
    HttpApiEndpoint.patch("update", "/v1/policies/:id")
      .setPath(IdPath)
      .setPayload(UpdatePolicy)
      .addSuccess(Policy)
      .addError(BadRequest)
      .addError(NotFound)
      .addError(BodyErrors)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .add(
    HttpApiEndpoint.del("remove", "/v1/policies/:id")
      .setPath(IdPath)
      .addSuccess(Schema.Void, { status: 204 })
      .addError(NotFound)
      .annotate(RatePolicy, { routeLimit: 30 })
  )
  .addError(ApiKeyRouteErrors)
  .middleware(Authentication)
  .pipe(documented(POLICIES_DOCS))
{}
