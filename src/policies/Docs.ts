/**
 * Summaries, descriptions and examples of policy rules, Cedar bundles and decisions (decisions
 * §13); PoliciesApi carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, GRANT, PRINCIPAL, T } from "../platform/DocExamples.ts"

const POLICY = "pol_01JDQ9SC6DEFGHJKMNPQRSTVWX"
const BUNDLE = "pbnd_01JDQ9TD7EFGHJKMNPQRSTVWXY"
const rule = {
  id: POLICY, name: "Block email sending at night", description: "Agents may not send email for our users outside office hours", effect: "deny", priority: 0,
  agentId: null, principalId: null, scopes: ["email:send"], timeOfDayStart: "19:00", timeOfDayEnd: "08:00", daysOfWeek: null, timeZone: "Asia/Kolkata",
  actions: ["authorize", "token.refresh"], principalGroups: null, createdAt: T, updatedAt: T
}
/** a Cedar set: no vault exchanges outside office hours (08:00-19:00 UTC) */
const CEDAR = "Ly8gbm8gdmF1bHQgZXhjaGFuZ2VzIG91dHNpZGUgb2ZmaWNlIGhvdXJzICgwODowMC0xOTowMCBVVEMpCmZvcmJpZChwcmluY2lwYWwsIGFjdGlvbiA9PSBBY3Rpb246OiJ2YXVsdC5leGNoYW5nZSIsIHJlc291cmNlKQp3aGVuIHsgY29udGV4dC50aW1lLm1pbnV0ZU9mRGF5IDwgNDgwIHx8IGNvbnRleHQudGltZS5taW51dGVPZkRheSA+PSAxMTQwIH07Cg=="
const bundle = {
  bundleId: BUNDLE, format: "cedar", version: "2026-11-24.1", sha256: "85d7221e7eb814b04dce22c09dd7db20b052d6cec1fea78a1f0c1225f7874af6",
  policyCount: 1, active: true, createdAt: T
}
const FIELDS = "Conditions are ANDed and null means any: `agentId`, `principalId`, `scopes` (an allow matches only when every requested scope is inside them; a deny matches any overlap), `timeOfDayStart` / `timeOfDayEnd` (`HH:MM`, both or neither; a window may cross midnight), `daysOfWeek` (1 Monday … 7 Sunday), `timeZone` (IANA, default UTC), `principalGroups` (directory groups), `actions` (`authorize`, the default, `delegate`, `bundle.create`, `token.refresh`, `vault.exchange`)."

export const POLICIES_DOCS = {
  create: {
    summary: "Create a policy rule",
    description: `Called by your backend: a rule evaluated whenever one of its \`actions\` happens for your agents. **Any matching deny wins** (then no allow counts, whatever its \`priority\`, which only picks the allow reported); an \`allow\` on \`authorize\` approves the request at once (the grant records \`approvalMethod: "policy"\`), but never skips a passkey (\`fidoRequired\`) or SSO requirement; a deny answers 403 \`POLICY_DENIED\` on authorize. ${FIELDS} Every field is checked and unknown fields are refused (400 with \`details\`). At most 50 rules on the free plan, 500 on pro (402 \`PLAN_LIMIT_EXCEEDED\`).`,
    request: {
      name: "Block email sending at night", description: "Agents may not send email for our users outside office hours", effect: "deny", scopes: ["email:send"],
      timeOfDayStart: "19:00", timeOfDayEnd: "08:00", timeZone: "Asia/Kolkata", actions: ["authorize", "token.refresh"]
    },
    response: rule
  },
  list: {
    summary: "List policy rules",
    description: "Your rules, newest first, with `total`; page with `cursor` / `limit` (1–100). Cedar policy sets are listed under bundles.",
    response: { policies: [rule], total: 1, nextCursor: null }
  },
  sync: {
    summary: "Upload a Cedar policy set",
    description: "For rules the built-in fields cannot say: a Cedar policy set (`content`, base64 of the UTF-8 text; at most 256 KiB and 500 policies), parsed and validated against the service's schema before it is stored (422 `POLICY_INVALID` with `details` naming the problem). Requests are `Agent::\"<agentId>\"` doing `Action::\"<action>\"` on `Principal::\"<principalId>\"` (members of `Group::\"…\"` from the directory), with a context of the scopes, the time (`iso`, `hhmm`, `minuteOfDay`, `weekday`, `tz`), the request's address and user agent, the grant, and the person (`active`, `groups`, `ssoVerified`). A `forbid` counts as a deny and a `permit` as an allow, alongside the rules. `activate` (default true) makes it the active set at once; `version` is your label. `format: \"rego\"` only when the service runs with `POLICY_BACKEND=opa` (422 otherwise).",
    request: { format: "cedar", version: "2026-11-24.1", content: CEDAR, activate: true },
    response: { ...bundle, fileCount: 1, activated: true }
  },
  bundles: {
    summary: "List policy sets",
    description: "Every uploaded set, newest first, with its digest and whether it is the active one; filter by `format`; page with `cursor` / `limit`.",
    response: { bundles: [bundle], nextCursor: null }
  },
  activeBundle: {
    summary: "The active policy set",
    description: "The set in force for `format` (default `cedar`); 404 when none is active.",
    response: bundle
  },
  activate: {
    summary: "Activate a policy set",
    description: "Makes an uploaded set the active one for its format (the previous one stays stored, so rolling back is activating it again). Takes effect at once, on every instance. 404 for an unknown set.",
    response: bundle
  },
  evaluate: {
    summary: "Dry-run a policy decision",
    description: "What your rules and active set would decide for a request, with no side effect (nothing logged, approved or denied): `effect` `allow`, `deny` or null (no opinion: the normal consent step), the deciding `policyId`, every policy that matched, and evaluation `errors`. `action` defaults to `authorize`; `at` (ISO 8601) tests another time; `request`, `grant`, `principal` and `oauth` (`{ resourceServerId, resource, clientOrigin }`, what an OAuth authorization adds) fill the context as the live paths would. A principal the directory has deactivated is always denied, whatever your policies say.",
    request: { action: "authorize", agentId: AGENT, principalId: PRINCIPAL, scopes: ["email:send"], at: "2026-11-24T20:15:00+05:30" },
    response: { effect: "deny", policyId: POLICY, determiningPolicies: [POLICY], errors: [], evaluatedAt: T }
  },
  decisions: {
    summary: "Policy decision log",
    description: "Every deny and every auto-approval of the last 30 days, newest first, with the rule or policies that decided and the grant an approval created; filter by `effect`, `agentId`, `since`; page with `cursor` / `limit`. Each is also in your audit chain (`service.policy.denied`, `service.policy.auto_approved`); denies emit `policy.denied`.",
    response: {
      decisions: [{
        decisionId: "pdec_01JDQ9VE8FGHJKMNPQRSTVWXYZ", effect: "deny", action: "authorize", agentId: AGENT, principalId: PRINCIPAL, scopes: ["email:send"],
        policyId: POLICY, determiningPolicies: [POLICY], errors: [], grantId: null, createdAt: T
      }, {
        decisionId: "pdec_01JDQ9WF9GHJKMNPQRSTVWXYZA", effect: "allow", action: "authorize", agentId: AGENT, principalId: PRINCIPAL, scopes: ["calendar:read"],
        policyId: "pol_01JDQ9XG0HJKMNPQRSTVWXYZAB", determiningPolicies: ["pol_01JDQ9XG0HJKMNPQRSTVWXYZAB"], errors: [], grantId: GRANT, createdAt: T
      }],
      nextCursor: null
    }
  },
  get: { summary: "Read a policy rule", description: "One rule by its `pol_` id; 404 for another developer's.", response: rule },
  update: {
    summary: "Update a policy rule",
    description: `Changes the fields sent (null clears a condition); the result is checked as a whole, as on create. Takes effect at once, on every instance. ${FIELDS}`,
    request: { daysOfWeek: [1, 2, 3, 4, 5] },
    response: { ...rule, daysOfWeek: [1, 2, 3, 4, 5] }
  },
  remove: { summary: "Delete a policy rule", description: "Removes the rule; it stops applying at once, on every instance. Decisions it made stay in the decision log." }
} satisfies Record<string, OperationDoc>
