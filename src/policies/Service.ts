/**
 * Policy enforcement (decisions §13). Each developer's rules and active Cedar set are loaded once,
 * the set pre-parsed, and kept in memory; a change drops the entry here at once and, through the
 * notification sql/0022's triggers send when it commits, on every other instance (as the API-key
 * cache does, platform/Auth.ts). ENTRY_MS bounds what a lost notification can leave behind.
 *
 * `guard` is the one call each evaluation point makes. It never fails with anything but
 * PolicyDenied: an engine (or the database behind it) that fails denies, and is logged.
 */
import { HttpServerRequest } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Effect, Layer, Option, Runtime, Schedule, Stream } from "effect"
import { Config } from "../Config.ts"
import { AuditChain } from "../platform/AuditChain.ts"
import { isEmbeddedDatabase } from "../platform/Database.ts"
import { PolicyDenied } from "../platform/Errors.ts"
import { Events } from "../platform/Events.ts"
import { newId } from "../platform/Ids.ts"
import { PeerAddress } from "../platform/RateLimit.ts"
import { nowMillis } from "../platform/Time.ts"
import { evaluateSet, type ParsedSet, type ParseOutcome, preparse } from "./Cedar.ts"
import { type CedarParser, cedarParserScoped } from "./CedarPool.ts"
import { evaluateOpa } from "./Opa.ts"
import { PolicyDirectory, PolicySso } from "./Ports.ts"
import { makeRepo } from "./Repo.ts"
import {
  combine, type Decision, ENGINE_FAILED, type OAuthPolicyFacts, type EngineResult, evaluateRules, localTime, type PolicyAction, type PolicyContext,
  type Rule, rulesName, sortRules
} from "./Rules.ts"

export const POLICY_CHANGES = "policy_changes"
const ENTRY_MS = 60_000
const FLAGS_REFRESH_MS = 60_000
/** sent on POLICY_CHANGES to learn that the listener is in place (no developer id looks like it) */
const LISTENING_PROBE = "listening"
const CACHE_MAX = 10_000
const DECISION_RETENTION_MS = 30 * 24 * 60 * 60 * 1000

/** Who asks, for whom, for what, at one evaluation point. */
export interface Subject {
  readonly developerId: string
  readonly agentId: string
  readonly principalId: string
  readonly scopes: ReadonlyArray<string>
  readonly grant?: { readonly id: string; readonly delegationDepth: number; readonly parentGrantId: string | null }
  /** an OAuth authorization or its grant (decisions §22.5) */
  readonly oauth?: OAuthPolicyFacts
}

/** What `evaluate` may override, for explaining what-ifs. */
export interface ContextOverrides {
  readonly at?: number
  readonly request?: { readonly ip?: string | undefined; readonly userAgent?: string | undefined }
  readonly principal?: { readonly active?: boolean | undefined; readonly groups?: ReadonlyArray<string> | undefined; readonly ssoVerified?: boolean | undefined }
}

export interface Loaded {
  readonly rules: ReadonlyArray<Rule>
  readonly cedar: ParsedSet | undefined
  readonly until: number
}

export interface Guarded {
  readonly decision: Decision
  /** authorize only: an allow that may auto-approve (the caller checks fidoRequired and SSO first) */
  readonly autoApprove: { readonly policyId: string } | undefined
  /** written in the caller's transaction once the grant exists: decision log and audit chain */
  readonly recordApproval: (grantId: string) => Effect.Effect<void>
}

export interface PolicyEngineService {
  /** evaluates and, on a deny, records it and fails with PolicyDenied */
  readonly guard: (action: PolicyAction, subject: Subject) => Effect.Effect<Guarded, PolicyDenied>
  /** whether some policy of the developer names the action: a Set lookup, no I/O (the vault's gate) */
  readonly namesAction: (developerId: string, action: PolicyAction) => boolean
  /** the decision and its explanation, without side effects */
  readonly explain: (action: PolicyAction, subject: Subject, overrides: ContextOverrides) => Effect.Effect<Decision & { evaluatedAt: string }>
  readonly load: (developerId: string) => Effect.Effect<Loaded>
  /** drops the developer's entry (after a change on this instance) and refreshes their flags */
  readonly changed: (developerId: string) => Effect.Effect<void>
  readonly ssoEnforced: (developerId: string) => Effect.Effect<boolean>
  /** parses and validates a Cedar set's text in a worker thread (CedarPool.ts) */
  readonly parseCedar: (text: string) => Effect.Effect<ParseOutcome>
  readonly cedarParser: CedarParser
  /**
   * The gate's policy step (decisions §20): the decision, nothing recorded; `record` writes the
   * decision log, audit entry and (on a deny) `policy.denied`, in its own transaction or the caller's.
   * `action` is a rule action or, at points rules cannot name, the point's name (Cedar and OPA see it).
   */
  readonly decide: (action: string, subject: Subject) => Effect.Effect<{
    readonly decision: Decision
    readonly record: (grantId: string | null) => Effect.Effect<void>
  }>
  /** whether a policy could apply at `action`: a rule naming it, an active Cedar set, or OPA (decisions §13 revised) */
  readonly applies: (developerId: string, action: string) => Effect.Effect<boolean>
  readonly denyMessage: (decision: Decision) => string
}

export class PolicyEngine extends Context.Tag("agent-auth/PolicyEngine")<PolicyEngine, PolicyEngineService>() {}

const denyMessage = (d: Decision) =>
  d.policyId === "builtin:principal-inactive"
    ? "The principal is inactive"
    : d.policyId === ENGINE_FAILED
    ? "Denied: a policy engine failed (policies fail closed)"
    : `Denied by policy ${d.policyId}`

export const PolicyEngineLive = Layer.scoped(
  PolicyEngine,
  Effect.gen(function*() {
    // the engine is loaded by the parser, with the first Cedar set this process reads or receives: a
    // set is evaluated only once it was parsed here (issue 37: an idle instance holds no engine)
    const parser = yield* cedarParserScoped()
    const parseCedar = (text: string) => Effect.promise(() => parser.parse(text))
    const sql = yield* SqlClient.SqlClient
    const config = yield* Config
    const audit = yield* AuditChain
    const events = yield* Events
    // required (decisions §20): the server provides the directory's and SSO's (src/Server.ts), a test its stubs
    const directory = yield* PolicyDirectory
    const sso = yield* PolicySso
    const repo = makeRepo(sql)
    const cache = new Map<string, Loaded>()
    /**
     * Developers whose policies could apply to a vault exchange, kept in memory so that the others'
     * exchanges pay nothing (§13 revised): a rule whose actions include it, or any active Cedar set (a
     * forbid with an unconstrained action, or naming the action only in `when`, applies everywhere).
     */
    const vaultNamers = new Set<string>()

    const readFlags = (developerId?: string) =>
      sql.unsafe<{ developerId: string }>(
        `SELECT DISTINCT developer_id FROM policies WHERE 'vault.exchange' = ANY(actions) ${developerId ? "AND developer_id = $1" : ""}
         UNION SELECT developer_id FROM policy_bundles WHERE active AND format = 'cedar' ${developerId ? "AND developer_id = $1" : ""}`,
        developerId ? [developerId] : []
      )

    /**
     * Parsed sets by developer, kept across cache entries: a stored set never changes (a new one gets
     * a new id), so an entry that expires re-reads the rules and the active set's id, and parses
     * only when that id changed.
     */
    const parsedSets = new Map<string, { readonly bundleId: string; readonly set: ParsedSet }>()

    const loadFresh = (developerId: string) =>
      Effect.gen(function*() {
        const rules = sortRules(yield* repo.rules(developerId))
        const bundleId = yield* repo.activeBundleId(developerId, "cedar")
        let cedar: ParsedSet | undefined
        if (bundleId === undefined) parsedSets.delete(developerId)
        else if (parsedSets.get(developerId)?.bundleId === bundleId) cedar = parsedSets.get(developerId)!.set
        else {
          const content = yield* repo.contentOf(bundleId)
          const parsed = content === undefined ? undefined : yield* parseCedar(Buffer.from(content).toString("utf8"))
          // stored sets were validated; one that no longer parses (a newer cedar) fails closed
          if (parsed === undefined || !parsed.ok || !preparse(developerId, parsed.set)) {
            return yield* Effect.fail(new Error(`the active Cedar set ${bundleId} does not parse`))
          }
          cedar = parsed.set
          if (parsedSets.size >= CACHE_MAX) parsedSets.clear()
          parsedSets.set(developerId, { bundleId, set: cedar })
        }
        const loaded: Loaded = { rules, cedar, until: Date.now() + ENTRY_MS }
        if (cache.size >= CACHE_MAX) cache.clear()
        cache.set(developerId, loaded)
        const names = rulesName(rules, "vault.exchange") || cedar !== undefined
        if (names) vaultNamers.add(developerId)
        else vaultNamers.delete(developerId)
        return loaded
      })

    const load = (developerId: string) =>
      Effect.suspend(() => {
        const hit = cache.get(developerId)
        if (hit !== undefined && hit.until > Date.now()) return Effect.succeed(hit)
        return loadFresh(developerId)
      }).pipe(Effect.orDie)

    const changed = (developerId: string) =>
      Effect.suspend(() => {
        cache.delete(developerId)
        return Effect.map(readFlags(developerId), (rows) => {
          if (rows.length > 0) vaultNamers.add(developerId)
          else vaultNamers.delete(developerId)
        })
      }).pipe(Effect.catchAllCause((cause) => Effect.logWarning("policy flags not refreshed", cause)))

    // Every instance knows which developers name vault.exchange (exchanges of the others are not
    // evaluated, so a flag must not go stale): it listens first, waits to hear its own probe (as
    // platform/Auth.ts does), then reads every flag, and reads them all again every minute in case a
    // notification was lost while the listener reconnected.
    const refreshAllFlags = Effect.gen(function*() {
      const rows = yield* readFlags()
      vaultNamers.clear()
      for (const row of rows) vaultNamers.add(row.developerId)
    })
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    if (pg._tag === "Some" && !isEmbeddedDatabase(config.databaseUrl)) {
      const listening = yield* Deferred.make<void>()
      yield* pg.value.listen(POLICY_CHANGES).pipe(
        Stream.runForEach((payload) => payload === LISTENING_PROBE ? Deferred.succeed(listening, undefined) : changed(payload)),
        Effect.retry({ schedule: Schedule.spaced("1 second") }),
        Effect.catchAllCause(() => Effect.void),
        Effect.forkScoped
      )
      // real time, not the service's Clock: tests hold that still while the service starts
      const realSleep = (ms: number) => Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, ms)))
      for (let probe = 0; probe < 50 && !(yield* Deferred.isDone(listening)); probe++) {
        yield* sql`SELECT pg_notify(${POLICY_CHANGES}, ${LISTENING_PROBE})`.pipe(Effect.ignore)
        yield* Effect.raceFirst(Deferred.await(listening), realSleep(100))
      }
      const runtime = yield* Effect.runtime<never>()
      const timer = setInterval(() => {
        Runtime.runFork(runtime)(refreshAllFlags.pipe(Effect.catchAllCause((cause) => Effect.logWarning("policy flags not refreshed", cause))))
      }, FLAGS_REFRESH_MS)
      timer.unref?.()
      yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(timer)))
    }
    yield* refreshAllFlags.pipe(Effect.orDie)

    const requestInfo = Effect.gen(function*() {
      const request = yield* Effect.serviceOption(HttpServerRequest.HttpServerRequest)
      const peer = yield* Effect.serviceOption(PeerAddress)
      const ua = Option.isSome(request) ? request.value.headers["user-agent"] : undefined
      return { ip: Option.getOrNull(peer), userAgent: typeof ua === "string" ? ua.slice(0, 500) : null }
    })

    /** `wantsSso`: an engine that can read `principal.ssoVerified` runs (Cedar, OPA); built-in rules never do, so no query for them */
    const contextFor = (action: PolicyAction, subject: Subject, overrides: ContextOverrides, wantsSso = true) =>
      Effect.gen(function*() {
        const ms = overrides.at ?? (yield* nowMillis)
        const found = yield* directory.principal(subject.developerId, subject.principalId)
        const request = yield* requestInfo
        const utc = localTime(ms, "UTC")
        const ctx: PolicyContext = {
          agentId: subject.agentId,
          agentDid: `did:${config.didMethod}:${subject.agentId}`,
          principalId: subject.principalId,
          developerId: subject.developerId,
          scopes: [...new Set(subject.scopes)],
          action,
          time: { iso: new Date(ms).toISOString(), hhmm: utc.hhmm, weekday: utc.weekday, tz: "UTC" },
          request: {
            ip: overrides.request?.ip ?? request.ip,
            userAgent: overrides.request?.userAgent ?? request.userAgent
          },
          ...(subject.grant !== undefined ? { grant: subject.grant } : {}),
          ...(subject.oauth !== undefined
            ? { resourceServerId: subject.oauth.resourceServerId, resource: subject.oauth.resource, clientOrigin: subject.oauth.clientOrigin }
            : {}),
          principal: {
            active: overrides.principal?.active ?? found.active,
            groups: overrides.principal?.groups ?? found.groups,
            ssoVerified: overrides.principal?.ssoVerified ??
              (found.ssoVerified || (wantsSso && (yield* sso.verified(subject.developerId, subject.principalId))))
          }
        }
        return { ctx, ms }
      })

    const failedEngine = (message: string): EngineResult => ({ denies: [], allows: [], errors: [{ policyId: null, message }], failed: true })

    /** every engine, deny overrides; nothing here fails: a failure is a deny */
    const decide = (action: PolicyAction, subject: Subject, overrides: ContextOverrides) =>
      Effect.gen(function*() {
        const loaded = yield* load(subject.developerId).pipe(
          Effect.catchAllCause((cause) =>
            Effect.as(Effect.logError("policies could not be loaded; denying", cause), undefined)
          )
        )
        // the directory is read whatever the developer's policies: an inactive principal is always denied
        const { ctx, ms } = yield* contextFor(action, subject, overrides, loaded === undefined || loaded.cedar !== undefined || config.policy.backend === "opa")
        const results: Array<EngineResult> = []
        if (loaded === undefined) results.push(failedEngine("the developer's policies could not be loaded"))
        else {
          try {
            results.push(evaluateRules(loaded.rules, ctx, ms))
          } catch {
            results.push(failedEngine("the built-in rules failed"))
          }
          if (loaded.cedar !== undefined) results.push(evaluateSet(subject.developerId, loaded.cedar, ctx))
        }
        if (config.policy.backend === "opa" && config.policy.opaUrl !== undefined) {
          results.push(yield* Effect.promise(() =>
            evaluateOpa(config.policy.opaUrl!, ctx, {
              timeoutMs: config.policy.opaTimeoutMs,
              allowPrivateHosts: config.webhooks.allowPrivateHosts
            })
          ))
        }
        const decision = combine(ctx, results)
        if (results.some((r) => r.failed)) {
          yield* Effect.logWarning("policy engine failed; denied").pipe(
            Effect.annotateLogs({ developerId: subject.developerId, action, errors: JSON.stringify(decision.errors).slice(0, 2000) })
          )
        }
        return { decision, ctx, ms }
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.gen(function*() {
            yield* Effect.logError("policy evaluation failed; denying", cause)
            const ms = yield* nowMillis
            const decision: Decision = {
              effect: "deny",
              policyId: ENGINE_FAILED,
              determiningPolicies: [ENGINE_FAILED],
              errors: [{ policyId: null, message: "policy evaluation failed" }]
            }
            return { decision, ctx: undefined, ms }
          })
        )
      )

    const record = (
      subject: Subject,
      action: PolicyAction,
      decision: Decision,
      ms: number,
      grantId: string | null
    ) =>
      sql.withTransaction(Effect.gen(function*() {
        const id = newId("pdec", ms)
        const at = new Date(ms)
        yield* repo.insertDecision(subject.developerId, {
          id,
          effect: decision.effect ?? "none",
          action,
          agentId: subject.agentId,
          principalId: subject.principalId,
          scopes: subject.scopes,
          policyId: decision.policyId,
          determiningPolicies: decision.determiningPolicies,
          errors: decision.errors,
          grantId,
          at
        })
        const metadata = { decisionId: id, action: action as string, policyId: decision.policyId, determiningPolicies: decision.determiningPolicies }
        if (decision.effect === "deny") {
          yield* events.emit(subject.developerId, "policy.denied", {
            decisionId: id,
            action,
            agentId: subject.agentId,
            principalId: subject.principalId,
            policyId: decision.policyId
          })
        }
        yield* audit.append({
          developerId: subject.developerId,
          action: decision.effect === "deny" ? "service.policy.denied" : "service.policy.auto_approved",
          agentId: subject.agentId,
          agentDid: `did:${config.didMethod}:${subject.agentId}`,
          grantId: grantId ?? subject.grant?.id ?? null,
          principalId: subject.principalId,
          metadata,
          status: decision.effect === "deny" ? "blocked" : "success"
        })
        // the log keeps 30 days; pruned now and then by whoever writes
        if (Math.random() < 0.01) yield* repo.pruneDecisions(new Date(ms - DECISION_RETENTION_MS))
      })).pipe(Effect.orDie)

    const guard: PolicyEngineService["guard"] = (action, subject) =>
      Effect.gen(function*() {
        const { decision, ms } = yield* decide(action, subject, {})
        if (decision.effect === "deny") {
          yield* record(subject, action, decision, ms, null).pipe(
            Effect.catchAllCause((cause) => Effect.logError("policy denial not recorded", cause))
          )
          return yield* Effect.fail(new PolicyDenied({ message: denyMessage(decision) }))
        }
        const autoApprove = action === "authorize" && decision.effect === "allow" ? { policyId: decision.policyId! } : undefined
        return {
          decision,
          autoApprove,
          recordApproval: (grantId: string) => record(subject, action, decision, ms, grantId)
        }
      })

    const decideFor: PolicyEngineService["decide"] = (action, subject) =>
      Effect.map(decide(action as PolicyAction, subject, {}), ({ decision, ms }) => ({
        decision,
        record: (grantId: string | null) =>
          record(subject, action as PolicyAction, decision, ms, grantId).pipe(
            Effect.catchAllCause((cause) => Effect.logError("policy decision not recorded", cause))
          )
      }))

    const applies: PolicyEngineService["applies"] = (developerId, action) =>
      config.policy.backend === "opa"
        ? Effect.succeed(true)
        // the vault's hot path reads the in-memory flag; other points the cached entry
        : action === "vault.exchange"
        ? Effect.succeed(vaultNamers.has(developerId))
        : Effect.map(
          load(developerId).pipe(Effect.catchAllCause(() => Effect.succeed(undefined))),
          // an entry that cannot be loaded is asked anyway: decide then fails closed
          (loaded) => loaded === undefined || loaded.cedar !== undefined || loaded.rules.some((r) => (r.actions as ReadonlyArray<string>).includes(action))
        )

    const explain: PolicyEngineService["explain"] = (action, subject, overrides) =>
      Effect.map(decide(action, subject, overrides), ({ decision, ms }) => ({ ...decision, evaluatedAt: new Date(ms).toISOString() }))

    return {
      guard,
      decide: decideFor,
      applies,
      denyMessage,
      namesAction: (developerId, action) => action === "vault.exchange" ? vaultNamers.has(developerId) : true,
      explain,
      load,
      changed,
      ssoEnforced: (developerId) => sso.enforced(developerId),
      parseCedar,
      cedarParser: parser
    }
  })
)
