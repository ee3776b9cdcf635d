/**
 * Composes the service: configuration → platform services (database with migrations, counters,
 * keys, metrics, API keys, audit chain, events) → capabilities → HTTP handlers and scheduled
 * fibers. `startServer` serves it with Bun.serve through HttpApiBuilder.toWebHandler (measured
 * ~15% faster than the Node server adapter under Bun; see README).
 */
import { HttpApiBuilder, HttpApiScalar, HttpApp, HttpServer } from "@effect/platform"
import { Context, Effect, Layer, ManagedRuntime, Option, type Runtime } from "effect"
import { AgentsHttp } from "./agents/Http.ts"
import { AgentsLive } from "./agents/Service.ts"
import { AgentSuspensionLive } from "./agents/Suspension.ts"
import { AnomalyCoreDisabled, AnomalyCoreLive } from "./anomalies/Core.ts"
import { AnomaliesHttp } from "./anomalies/Http.ts"
import { AnomaliesLive } from "./anomalies/Service.ts"
import { WorkerLive as AnomalyWorker } from "./anomalies/Worker.ts"
import { AnomalyChannelsLive } from "./anomalies/Channels.ts"
import { AnomalyChannelsHttp } from "./anomalies/ChannelsHttp.ts"
import { PasskeySignalsFromAnomalies } from "./anomalies/PasskeySignals.ts"
import { Api } from "./Api.ts"
import { AuditHttp } from "./audit/Http.ts"
import { AuditLive } from "./audit/Service.ts"
import { AuthorizationHttp } from "./authorization/Http.ts"
import { AuthorizationLive } from "./authorization/Service.ts"
import { BillingHttp, BillingProviderHttp } from "./billing/Http.ts"
import { BillingLive } from "./billing/Entitlements.ts"
import { WorkerLive as BillingCloseWorker } from "./billing/Worker.ts"
import { BreachesHttp } from "./breaches/Http.ts"
import { BreachesLive } from "./breaches/Service.ts"
import { WorkerLive as BreachDeadlineWorker } from "./breaches/Worker.ts"
import { BudgetsHttp } from "./budgets/Http.ts"
import { BudgetsLive } from "./budgets/Service.ts"
import { ComplianceHttp } from "./compliance/Http.ts"
import { ComplianceLive } from "./compliance/Service.ts"
import { WorkerLive as ComplianceJobWorker } from "./compliance/Worker.ts"
import { type AppConfig, Config } from "./Config.ts"
import { ConsentBundlesHttp } from "./consent-bundles/Http.ts"
import { ConsentBundlesLive } from "./consent-bundles/Service.ts"
import { CredentialsHttp } from "./credentials/Http.ts"
import { CredentialsLive } from "./credentials/Service.ts"
import { DevelopersHttp } from "./developers/Http.ts"
import { DeveloperKeysLive } from "./developers/Keys.ts"
import { DevelopersServiceLive } from "./developers/Service.ts"
import { ScimHttp, ScimTokensHttp } from "./directory/Http.ts"
import { DirectoryLive } from "./directory/Service.ts"
import { DomainsHttp } from "./domains/Http.ts"
import { DomainsLive } from "./domains/Service.ts"
import { DpdpGrievancesHttp, DpdpNoticesHttp, DpdpRecordsHttp } from "./dpdp/Http.ts"
import { DpdpLive } from "./dpdp/Service.ts"
import { DpdpApprovalLive } from "./dpdp/ApprovalConsent.ts"
import { WorkerLive as GrievanceDeadlineWorker } from "./dpdp/Worker.ts"
import { EventsHttp } from "./events/Http.ts"
import { CONSOLE_LIVE_PATH } from "./console/Api.ts"
import { ConsoleHttp } from "./console/Http.ts"
import { makeSelfApi } from "./console/SelfApi.ts"
import { ConsoleSessionsLive } from "./console/Sessions.ts"
import { EVENT_STREAM_PATH } from "./events/Api.ts"
import { EventStreamsLive } from "./events/Stream.ts"
import { ErasureWorkerLive as DpdpFiber } from "./dpdp/ErasureWorker.ts"
import { GrantsHttp } from "./grants/Http.ts"
import { GrantsLive } from "./grants/Service.ts"
import { RevocationPathLive } from "./grants/Revocation.ts"
import { OAuthHttp, ResourceServersHttp } from "./oauth/Http.ts"
import { OAuthLive } from "./oauth/Live.ts"
import { type CimdFetch, CimdFetchLive } from "./oauth/CimdFetch.ts"
import { OAuthSignInLive } from "./oauth/SignIn.ts"
import { OAuthSignInHttp } from "./oauth/SignInHttp.ts"
import { DcrCleanupLive } from "./oauth/Cleanup.ts"
import { OfflineSyncHttp } from "./offline-sync/Http.ts"
import { OfflineSyncLive } from "./offline-sync/Service.ts"
import { PasskeysHttp } from "./passkeys/Http.ts"
import { PasskeysLive } from "./passkeys/Service.ts"
import { ApiKeysLive, AuthenticationLive } from "./platform/Auth.ts"
import { PermissionsPageHttp, PrincipalHttp, PrincipalSessionsHttp } from "./principals/Http.ts"
import { PrincipalsLive } from "./principals/Service.ts"
import { ChallengeCleanupLive } from "./passkeys/Cleanup.ts"
import { AuditChainLive } from "./platform/AuditChain.ts"
import { AuditedEventsLive } from "./platform/AuditedEvents.ts"
import { CountersLive } from "./platform/Counters.ts"
import { DatabaseLive } from "./platform/Database.ts"
import { DataDirectoryLive } from "./platform/DataDirectory.ts"
import { DependenciesLive, DependencyMonitorLive } from "./platform/Dependencies.ts"
import { EventsLive } from "./platform/Events.ts"
import { type BodyVerdict, makeBodyReader, PreReadBody } from "./platform/Body.ts"
import { withCommonHeaders } from "./platform/SecurityHeaders.ts"
import { databaseErrorsAsResponses, envelope } from "./platform/HttpEnvelope.ts"
import { pageRoutes } from "./platform/Pages.ts"
import { KeysLive } from "./platform/Keys.ts"
import { AccessTokensLive } from "./platform/AccessTokens.ts"
import { effectLoggerLayer, Log, makeLog } from "./platform/Log.ts"
import { tracingLayer } from "./platform/Tracing.ts"
import { MetricsLive } from "./platform/Metrics.ts"
import { runMigrations } from "./platform/Migrate.ts"
import { makeGate } from "./platform/Admission.ts"
import { PeerAddress } from "./platform/RateLimit.ts"
import { PoliciesHttp } from "./policies/Http.ts"
import { type DirectoryPrincipals, DirectoryPrincipalsLive } from "./directory/Principals.ts"
import { PolicyDirectoryFromDirectory } from "./policies/DirectoryPort.ts"
import type { PolicyDirectory } from "./policies/Ports.ts"
import { DirectoryRevocationsLive } from "./authorization/DirectoryRevocations.ts"
import { ApprovalLive } from "./authorization/PasskeyApproval.ts"
import { GateLive } from "./gate/Gate.ts"
import { DelegationLive } from "./grants/Delegation.ts"
import { PolicyEngineLive } from "./policies/Service.ts"
import { SsoConnectionsHttp, SsoLoginHttp } from "./sso/Http.ts"
import { DirectorySessionsFromSso, PolicySsoFromSso, SsoCoreLive, SsoLive } from "./sso/Live.ts"
import { SamlHttp } from "./sso/saml/Http.ts"
import { SystemHttp } from "./system/Http.ts"
import { makeLeanPath } from "./system/Lean.ts"
import { VaultHttp } from "./vault/Http.ts"
import { VaultLive } from "./vault/Service.ts"
import { WebhooksHttp } from "./webhooks/Http.ts"
import { WebhooksLive } from "./webhooks/Service.ts"
import { WorkerLive as WebhookDeliveryWorker } from "./webhooks/Worker.ts"

export interface AppOptions {
  /** the policies' view of the directory, replaced by tests with a stub (decisions §13) */
  readonly policyDirectory?: Layer.Layer<PolicyDirectory, never, DirectoryPrincipals>
  /** how CIMD documents are fetched, replaced by tests that serve one over TLS on loopback (decisions §22.3) */
  readonly cimdFetch?: Layer.Layer<CimdFetch>
  /** extra layers merged last, e.g. TestContext for TestClock */
  readonly extra?: Layer.Layer<never>
  /** run the scheduled fibers (webhook delivery, breach deadlines) */
  readonly workers?: boolean
  /** benchmarks only: serve without the rate-limit gate, to measure what it costs */
  readonly rateLimit?: boolean
  /** false: every request goes through the API, /health included (src/system/Lean.ts) */
  readonly lean?: boolean
  /** benchmarks only: false runs no inline anomaly rule, to measure what they cost */
  readonly anomalies?: boolean
}

/** The database, migrated first unless MIGRATE_ON_START=false. */
const MigratedDatabase = Layer.tap(DatabaseLive, (context) =>
  Effect.gen(function*() {
    const config = yield* Config
    if (!config.migrateOnStart) return
    const applied = yield* Effect.provide(runMigrations, context).pipe(Effect.orDie)
    // what this start changed in the schema, by name, in one line (nothing pending is said too)
    const migrations = applied.map(([id, name]) => `${String(id).padStart(4, "0")}_${name}`)
    yield* (migrations.length > 0
      ? Effect.logInfo("migrations applied").pipe(Effect.annotateLogs({ count: migrations.length, migrations }))
      : Effect.logInfo("no pending migrations"))
  }))

export const makeAppLayer = (config: AppConfig, options: AppOptions = {}) => {
  const ConfigLive = Config.layer(config)
  const LogLive = Layer.succeed(Log, makeLog(config.logLevel))
  // the data directory's lock first: nothing opens or writes the directory before it is held
  const Base = Layer.mergeAll(MigratedDatabase, CountersLive, KeysLive, MetricsLive, LogLive).pipe(
    Layer.provideMerge(DataDirectoryLive),
    Layer.provideMerge(ConfigLive)
  )
  // decisions §14: the inline anomaly rules sit below grants, which call them when they revoke
  // passkeys signal counter regressions through their own port, which anomalies answer (AD-011)
  const Platform = PasskeySignalsFromAnomalies.pipe(
    Layer.provideMerge(options.anomalies === false ? AnomalyCoreDisabled : AnomalyCoreLive),
    // the core's enforce-mode responses act through these two, below it (decisions §14, §20)
    Layer.provideMerge(AgentSuspensionLive),
    Layer.provideMerge(RevocationPathLive),
    Layer.provideMerge(CredentialsLive),
    Layer.provideMerge(AuditedEventsLive),
    Layer.provideMerge(Layer.mergeAll(ApiKeysLive, AuditChainLive, EventsLive, DependenciesLive, AccessTokensLive)),
    Layer.provideMerge(Base)
  )
  // decisions §20: layers are composed here only, each capability given what it needs from below.
  // Floor 1: agents, grants (with credentials), the directory's reading of principals, policies, billing.
  const Floor1 = AgentsLive.pipe(
    Layer.provideMerge(GrantsLive),
    // policies (and the directory, read through its service) are read by the gate and compliance; SSO answers the
    // policies' SSO port (decisions §12)
    Layer.provideMerge(PolicyEngineLive.pipe(
      Layer.provide(Layer.merge(options.policyDirectory ?? PolicyDirectoryFromDirectory, PolicySsoFromSso)),
      Layer.provideMerge(DirectoryPrincipalsLive)
    )),
    Layer.provideMerge(BillingLive),
    Layer.provideMerge(Platform)
  )
  // Floor 2: the gate, then every point where a grant is made or used (decisions §20)
  const Floor2 = Layer.mergeAll(AuthorizationLive, ConsentBundlesLive, VaultLive, DelegationLive).pipe(
    Layer.provideMerge(GateLive),
    Layer.provideMerge(DpdpApprovalLive),
    Layer.provideMerge(Floor1)
  )
  // Floor 3: passkeys approve through authorization; principals' sessions; the directory, whose
  // deprovisioning reaches the capabilities above it through its ports (decisions §11, §12)
  // decisions §22: the OAuth server makes and uses grants through authorization and the gate
  // (resource servers read SSO connections: login.sso needs an active one)
  const Floor3 = Layer.mergeAll(PasskeysLive.pipe(Layer.provide(ApprovalLive)), PrincipalsLive, OAuthLive.pipe(Layer.provide(options.cimdFetch ?? CimdFetchLive), Layer.provide(SsoCoreLive))).pipe(
    Layer.provideMerge(Floor2)
  )
  const DirectoryPorts = Layer.mergeAll(DirectorySessionsFromSso, DirectoryRevocationsLive)
  const Directory = DirectoryLive.pipe(Layer.provide(DirectoryPorts), Layer.provideMerge(Floor3))
  const Capabilities = Layer.mergeAll(
    DevelopersServiceLive,
    DeveloperKeysLive,
    AuditLive,
    OfflineSyncLive,
    BreachesLive,
    DpdpLive,
    BudgetsLive,
    DomainsLive,
    WebhooksLive,
    AnomalyChannelsLive,
    ComplianceLive,
    // SSO (decisions §12) writes the directory (JIT) and opens principal sessions (the permissions page);
    // the OAuth sign-in (decisions §22.5) signs people in through it and through passkeys
    OAuthSignInLive.pipe(Layer.provideMerge(SsoLive)),
    AnomaliesLive,
    EventStreamsLive,
    ConsoleSessionsLive
  ).pipe(Layer.provideMerge(Directory))
  const Handlers = Layer.mergeAll(
    SystemHttp,
    DevelopersHttp,
    AgentsHttp,
    AuthorizationHttp,
    GrantsHttp,
    AuditHttp,
    ConsentBundlesHttp,
    OfflineSyncHttp,
    VaultHttp,
    BreachesHttp,
    DpdpNoticesHttp,
    DpdpRecordsHttp,
    DpdpGrievancesHttp,
    BudgetsHttp,
    DomainsHttp,
    PasskeysHttp,
    WebhooksHttp,
    ScimTokensHttp,
    ScimHttp,
    ComplianceHttp,
    CredentialsHttp,
    PrincipalSessionsHttp,
    PrincipalHttp,
    PermissionsPageHttp,
    PoliciesHttp,
    BillingHttp,
    BillingProviderHttp,
    SsoConnectionsHttp,
    SsoLoginHttp,
    SamlHttp,
    AnomaliesHttp,
    AnomalyChannelsHttp,
    EventsHttp,
    ConsoleHttp,
    ResourceServersHttp,
    OAuthHttp,
    OAuthSignInHttp
  ).pipe(Layer.provide(AuthenticationLive))
  const ApiLive = HttpApiBuilder.api(Api).pipe(
    Layer.provide(Handlers),
    Layer.provide(HttpApiBuilder.middleware(databaseErrorsAsResponses as any))
  )
  const Workers = options.workers === false || !config.workersEnabled
    ? Layer.empty
    : Layer.mergeAll(WebhookDeliveryWorker, ComplianceJobWorker, BreachDeadlineWorker, GrievanceDeadlineWorker, DpdpFiber, ChallengeCleanupLive, BillingCloseWorker,
      AnomalyWorker, DcrCleanupLive)
  // the dependency monitor runs wherever the service serves (tests that start no fibers start none)
  const Monitor = options.workers === false ? Layer.empty : DependencyMonitorLive
  const Docs = HttpApiScalar.layer({ path: "/docs", scalar: { withDefaultFonts: false } }).pipe(Layer.provideMerge(ApiLive))
  return Layer.mergeAll(Docs, Workers, Monitor, HttpServer.layerContext).pipe(
    Layer.provideMerge(Capabilities),
    Layer.provide(effectLoggerLayer(config.logLevel)),
    // Spans (one per request and per SQL statement) go to OTEL_EXPORTER_OTLP_ENDPOINT; unset, tracing is off (pure cost).
    Layer.provide(tracingLayer(config.otlpEndpoint)),
    Layer.provide(options.extra ?? Layer.empty)
  )
}

export interface RunningServer {
  readonly url: string
  readonly port: number
  readonly handler: (request: Request) => Promise<Response>
  /** the same handler without the lean path (tests compare the two answers) */
  readonly viaApi: (request: Request) => Promise<Response>
  /** the lean path alone: undefined where it does not answer (src/system/Lean.ts) */
  readonly lean: (request: Request) => Promise<Response> | undefined
  /** runs an effect in the service's own runtime (same database, clock, services) */
  readonly run: <A, E>(effect: Effect.Effect<A, E, any>) => Promise<A>
  /** stop accepting, finish in-flight requests, stop fibers, close pools */
  readonly stop: () => Promise<void>
}

/**
 * Builds every layer (migrations included) before anything listens, so no early request waits or
 * 404s, then serves the API through one web handler.
 */
export const makeRuntime = async (config: AppConfig, options: AppOptions = {}) => {
  // the console calls the public API through this very handler (decisions §23), bound once it exists
  const self = makeSelfApi()
  const layer = Layer.mergeAll(makeAppLayer(config, options), HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer).pipe(Layer.provide(self.layer))
  const runtime = ManagedRuntime.make(layer as Layer.Layer<any, unknown>)
  const rt = await runtime.runtime()
  const app = await runtime.runPromise(HttpApiBuilder.httpApp as Effect.Effect<any, never, any>)
  const gate = options.rateLimit === false ? (inner: any) => inner : makeGate(Api)
  const isPage = pageRoutes(Api)
  const webHandler = HttpApp.toWebHandlerRuntime(rt)(app, (inner) => envelope(gate(inner), isPage) as any)
  const readBody = makeBodyReader(Api)
  // Every request's body is read (bounded) before the runtime; every response gets the common headers.
  const viaApi = async (request: Request, context: Context.Context<any> = Context.empty() as Context.Context<any>): Promise<Response> =>
    viaApiRead(request, context, await readBody(request))
  const viaApiRead = async (request: Request, context: Context.Context<any>, body: BodyVerdict | undefined): Promise<Response> => {
    const response = await webHandler(request, (body === undefined ? context : Context.add(context, PreReadBody, body)) as any)
    return withCommonHeaders(request, response)
  }
  // health, light reads and the vault exchange answered outside HttpApiBuilder (src/system/Lean.ts; not when
  // tracing: the API path makes the request's span; not without the gate: the lean path always admits through it)
  const lean = options.lean === false || options.rateLimit === false || config.otlpEndpoint !== undefined
    ? undefined
    : await runtime.runPromise(makeLeanPath(rt as Runtime.Runtime<never>, {
      readBody,
      viaApi: (request, peer, body) =>
        viaApiRead(request, peer === undefined ? Context.empty() as Context.Context<any> : Context.make(PeerAddress, peer), body)
    }))
  const handler = (request: Request, context?: Context.Context<any>): Promise<Response> =>
    lean?.(request, () => context === undefined ? undefined : Option.getOrUndefined(Context.getOption(context, PeerAddress))) ??
      viaApi(request, context)
  self.bind((request, peer) => handler(request, peer === undefined ? undefined : Context.make(PeerAddress, peer)))
  return {
    handler,
    lean,
    viaApi,
    run: <A, E>(effect: Effect.Effect<A, E, any>) => runtime.runPromise(effect as Effect.Effect<A, E, never>),
    dispose: () => runtime.dispose()
  }
}

export const startServer = async (config: AppConfig, options: AppOptions = {}): Promise<RunningServer> => {
  const { handler, lean, viaApi, run, dispose } = await makeRuntime(config, options)
  const server = Bun.serve({
    port: config.port,
    hostname: config.host,
    maxRequestBodySize: 16 * 1024 * 1024,
    fetch: (request, srv) => {
      // the peer address is asked only when needed (health never needs it)
      const peerOf = () => srv.requestIP(request)?.address
      // a live event stream stays open past Bun's idle timeout (its heartbeats keep proxies awake)
      if (request.url.includes(EVENT_STREAM_PATH) || request.url.includes(CONSOLE_LIVE_PATH)) srv.timeout(request, 0)
      const quick = lean?.(request, peerOf)
      if (quick !== undefined) return quick
      const peer = peerOf()
      let context = Context.empty() as Context.Context<any>
      if (peer !== undefined) context = Context.add(context, PeerAddress, peer)
      return viaApi(request, context)
    }
  })
  let stopped = false
  return {
    url: `http://127.0.0.1:${server.port}`,
    port: server.port!,
    handler: (request) => handler(request),
    viaApi: (request) => viaApi(request),
    lean: (request) => lean?.(request, () => undefined),
    run,
    stop: async () => {
      if (stopped) return
      stopped = true
      await server.stop(false)
      await dispose()
    }
  }
}
