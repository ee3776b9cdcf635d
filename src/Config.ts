/**
 * Config: every environment variable of decisions §10, read once and validated.
 * A missing or malformed variable is a ConfigError naming it; main.ts prints that one line and exits 1.
 * The variable table is ConfigVariables.ts and the per-variable checks ConfigParsing.ts; this file
 * holds the settings' shape and loadConfig, and re-exports VARIABLES and ConfigError.
 */
import { Context, Layer } from "effect"
import { createPrivateKey } from "node:crypto"
import { loadPlans, type Plans, PlansProblem } from "./billing/Plans.ts"
import { oauthSettings } from "./ConfigOAuth.ts"
import {
  boolean, checkHost, checkOrigin, checkResolver, checkRpId, checkVaultKeys, ConfigError, didWebDomain, type Env, integer, isRsaKey,
  limitOrNone, parseTrustProxy, positiveNumber, required, splitPems, type SsoSettings, ssoSettings, type TrustProxy, url, vcPreviousKeys, vcSigningKey,
  type WebauthnTrust, webauthnTrust
} from "./ConfigParsing.ts"

export { ConfigError, type TrustProxy } from "./ConfigParsing.ts"
export { VARIABLES } from "./ConfigVariables.ts"

export interface AppConfig {
  readonly production: boolean
  readonly databaseUrl: string
  readonly redisUrl: string
  readonly rsaPrivateKey: string | undefined
  readonly autoGenerateKeys: boolean
  readonly rsaPreviousPublicKeys: ReadonlyArray<string>
  readonly jwtIssuer: string
  readonly port: number
  readonly host: string
  readonly publicBaseUrl: string
  readonly trustProxy: TrustProxy
  readonly vaultEncryptionKeys: string | undefined
  readonly didMethod: string
  readonly maxDelegationDepth: number
  readonly webauthn: { readonly rpId: string; readonly origin: string; readonly rpName: string }
  readonly webauthnTrust: WebauthnTrust
  readonly webhooks: {
    readonly allowPrivateHosts: boolean
    readonly pollIntervalSeconds: number
    readonly retryBaseSeconds: number
    readonly timeoutSeconds: number
    readonly maxAttempts: number
    /** endpoints a developer may have, per plan (null: no cap); decisions §16, §19 */
    readonly endpointLimits: { readonly free: number | null; readonly pro: number | null; readonly enterprise: number | null }
    /** sends in flight at once: per endpoint, per developer (across instances) and per instance */
    readonly endpointConcurrency: number
    readonly developerConcurrency: number
    readonly concurrency: number
  }
  readonly compliance: { readonly jobPollSeconds: number }
  readonly sso: SsoSettings
  /** decisions §22.9: the issuer base (issuers are `<base>/oauth/<developerId>`), the code and sign-in lifetimes */
  readonly oauth: {
    readonly issuerBase: string
    readonly codeTtlMs: number
    readonly interactionTtlMs: number
    /** decisions §22.3, §22.9: fetching client ID metadata documents */
    readonly cimd: { readonly timeoutMs: number; readonly maxBytes: number; readonly allowPrivateHosts: boolean }
  }
  /** decisions §14: the windowed rules' pass, per developer */
  readonly anomalies: { readonly intervalSeconds: number }
  readonly breaches: {
    readonly deadlineAlertsEnabled: boolean
    readonly alertLeadMinutes: number
    readonly alertIntervalSeconds: number
    /** decisions §21: the same fiber's poll also alerts grievance deadlines */
    readonly grievanceAlertsEnabled: boolean
    readonly grievanceAlertLeadDays: number
    /** decisions §21: the DPDP fiber's poll (scheduled erasures, log holds) */
    readonly dpdpFiberIntervalSeconds: number
  }
  readonly rateLimits: RateLimitFigures
  /** decisions §13: built-in rules and Cedar always; OPA over HTTP when `backend` is "opa" */
  readonly policy: { readonly backend: "builtin" | "opa"; readonly opaUrl: string | undefined; readonly opaTimeoutMs: number }
  /** decisions §16: every plan's limits, fee and overage prices (defaults, WEBHOOK_ENDPOINTS_*, PLANS_FILE) */
  readonly plans: Plans
  readonly dnsResolver: string | undefined
  readonly metricsToken: string | undefined
  readonly logLevel: "debug" | "info" | "warn" | "error" | "none"
  /** where the embedded mode keeps generated secrets (vault key); derived from a pglite:// path */
  readonly dataDir: string | undefined
  readonly migrateOnStart: boolean
  /** how long `serve` waits for PostgreSQL and Redis at start before exiting 75 */
  readonly startupTimeoutSeconds: number
  /** prefix of every Redis key (tests give each app its own) */
  readonly redisKeyPrefix: string
  readonly workersEnabled: boolean
  /** open sign-up (POST /v1/signup); off, operators create developers with the binary */
  readonly signupEnabled: boolean
  /** OTLP/HTTP base URL for trace export; unset, tracing stays off */
  readonly otlpEndpoint: string | undefined
  /** decisions §18: the Ed25519 credential key (PEM), previous public keys, the did:web domain override */
  readonly vc: {
    readonly signingKey: string | undefined
    readonly previousPublicKeys: ReadonlyArray<string>
    readonly didWebDomain: string | undefined
  }
}

export interface RateLimitFigures {
  readonly planFree: number
  readonly planPro: number
  readonly planEnterprise: number
  readonly routeDefault: number
  readonly containment: number
  readonly revocationStatus: number
  readonly authorizePerDeveloper: number
  /** sign-ups per source address per clock hour */
  readonly signupPerHour: number
  /** decisions §22.9: `/token` per client_id per minute, `/register` per developer per clock hour, introspection per resource server per minute */
  readonly oauthTokenPerClient: number
  readonly oauthRegisterPerDeveloper: number
  readonly oauthIntrospect: number
  readonly scale: number
}

export class Config extends Context.Tag("agent-auth/Config")<Config, AppConfig>() {
  static layer = (config: AppConfig) => Layer.succeed(Config, config)
}
const LOG_LEVELS = ["debug", "info", "warn", "error", "none"] as const

/** Reads and validates the environment. Throws ConfigError on the first bad variable. */
export const loadConfig = (env: Env = process.env): AppConfig => {
  const production = env.NODE_ENV === "production"
  const databaseUrl = url("DATABASE_URL", required(env, "DATABASE_URL"), ["postgres:", "postgresql:", "pglite:"])
  const redisUrl = url("REDIS_URL", required(env, "REDIS_URL"), ["redis:", "rediss:", "memory:"])
  // the database index is the path (redis://host:6379/2): anything else would silently mean db 0
  if (!redisUrl.startsWith("memory:") && !/^\/?(\d{1,5})?$/.test(new URL(redisUrl).pathname)) {
    throw new ConfigError("REDIS_URL", "the path must be a database index, e.g. redis://host:6379/0")
  }
  const autoGenerateKeys = boolean(env, "AUTO_GENERATE_KEYS")
  const rsaPrivateKey = env.RSA_PRIVATE_KEY?.trim() ? env.RSA_PRIVATE_KEY.replace(/\\n/g, "\n") : undefined
  if (rsaPrivateKey === undefined && !autoGenerateKeys) {
    throw new ConfigError("RSA_PRIVATE_KEY", "is required unless AUTO_GENERATE_KEYS=true")
  }
  if (rsaPrivateKey === undefined && production) {
    throw new ConfigError("RSA_PRIVATE_KEY", "is required in production (generated keys are for development)")
  }
  if (rsaPrivateKey !== undefined && (!rsaPrivateKey.includes("PRIVATE KEY-----") || !isRsaKey(() => createPrivateKey(rsaPrivateKey)))) {
    throw new ConfigError("RSA_PRIVATE_KEY", "must be a readable PEM RSA private key")
  }
  const vaultEncryptionKeys = env.VAULT_ENCRYPTION_KEYS?.trim() || undefined
  if (vaultEncryptionKeys === undefined && production) {
    throw new ConfigError("VAULT_ENCRYPTION_KEYS", "is required in production")
  }
  if (vaultEncryptionKeys !== undefined) checkVaultKeys(vaultEncryptionKeys)
  const vc = {
    signingKey: vcSigningKey(env, production),
    previousPublicKeys: vcPreviousKeys(env.VC_PREVIOUS_PUBLIC_KEYS),
    didWebDomain: didWebDomain(env.DID_WEB_DOMAIN)
  }
  const port = integer(env, "PORT", 3001)
  if (port > 65535) throw new ConfigError("PORT", "must be at most 65535")
  const publicBaseUrl = (env.PUBLIC_BASE_URL?.trim()
    ? url("PUBLIC_BASE_URL", env.PUBLIC_BASE_URL.trim(), ["http:", "https:"])
    : `http://localhost:${port}`).replace(/\/+$/, "")
  const logLevel = (env.LOG_LEVEL?.trim() || "info") as AppConfig["logLevel"]
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError("LOG_LEVEL", `must be one of ${LOG_LEVELS.join(", ")}`)
  const didMethod = env.DID_METHOD?.trim() || "service"
  if (!/^[a-z0-9]+$/.test(didMethod)) throw new ConfigError("DID_METHOD", "must be lowercase letters and digits")
  const jwtIssuer = env.JWT_ISSUER?.trim() || "https://agent-auth.local"
  // production refuses what exposes internals: private webhook receivers, a public /metrics
  if (production && env.WEBHOOK_ALLOW_PRIVATE_HOSTS === "true") {
    throw new ConfigError("WEBHOOK_ALLOW_PRIVATE_HOSTS", "must not be true in production")
  }
  if (production && env.SSO_ALLOW_PRIVATE_HOSTS === "true") {
    throw new ConfigError("SSO_ALLOW_PRIVATE_HOSTS", "must not be true in production")
  }
  const sso = ssoSettings(env, production)
  if (production && !env.METRICS_TOKEN?.trim()) {
    throw new ConfigError("METRICS_TOKEN", "is required in production (/metrics is not served publicly)")
  }
  const policyBackend = env.POLICY_BACKEND?.trim() || "builtin"
  if (policyBackend !== "builtin" && policyBackend !== "opa") throw new ConfigError("POLICY_BACKEND", "must be builtin or opa")
  const opaUrl = env.OPA_URL?.trim() ? url("OPA_URL", env.OPA_URL.trim(), ["http:", "https:"]) : undefined
  if (policyBackend === "opa" && opaUrl === undefined) throw new ConfigError("OPA_URL", "is required when POLICY_BACKEND=opa")
  const endpointLimits = {
    free: limitOrNone(env, "WEBHOOK_ENDPOINTS_FREE", 30),
    pro: limitOrNone(env, "WEBHOOK_ENDPOINTS_PRO", 200),
    enterprise: limitOrNone(env, "WEBHOOK_ENDPOINTS_ENTERPRISE", null)
  }
  let plans: Plans
  try {
    plans = loadPlans(endpointLimits, env.PLANS_FILE?.trim() || undefined)
  } catch (e) {
    throw new ConfigError("PLANS_FILE", e instanceof PlansProblem ? e.message : "is malformed")
  }
  const dataDir = databaseUrl.startsWith("pglite://") && databaseUrl !== "pglite://memory"
    ? databaseUrl.slice("pglite://".length)
    : undefined
  return {
    production,
    databaseUrl,
    redisUrl,
    rsaPrivateKey,
    autoGenerateKeys,
    rsaPreviousPublicKeys: splitPems(env.RSA_PREVIOUS_PUBLIC_KEYS),
    jwtIssuer,
    port,
    host: checkHost(env.HOST?.trim() || "0.0.0.0"),
    publicBaseUrl,
    trustProxy: parseTrustProxy(env.TRUST_PROXY),
    vaultEncryptionKeys,
    didMethod,
    maxDelegationDepth: integer(env, "MAX_DELEGATION_DEPTH", 3, 1),
    webauthn: {
      rpId: checkRpId(env.WEBAUTHN_RP_ID?.trim() || "localhost"),
      // by default the origin of PUBLIC_BASE_URL (an origin never has a path)
      origin: env.WEBAUTHN_ORIGIN?.trim() ? checkOrigin(env.WEBAUTHN_ORIGIN.trim()) : new URL(publicBaseUrl).origin,
      rpName: env.WEBAUTHN_RP_NAME?.trim() || "agent-auth-service"
    },
    webauthnTrust: webauthnTrust(env),
    webhooks: {
      allowPrivateHosts: boolean(env, "WEBHOOK_ALLOW_PRIVATE_HOSTS"),
      pollIntervalSeconds: positiveNumber(env, "WEBHOOK_POLL_INTERVAL_SECONDS", 30),
      retryBaseSeconds: positiveNumber(env, "WEBHOOK_RETRY_BASE_SECONDS", 30),
      timeoutSeconds: positiveNumber(env, "WEBHOOK_TIMEOUT_SECONDS", 10),
      maxAttempts: integer(env, "WEBHOOK_MAX_ATTEMPTS", 5, 1),
      // the plans' webhook caps (PLANS_FILE may change them); kept here for readers of the old field
      endpointLimits: {
        free: plans.free?.limits.webhooks ?? null,
        pro: plans.pro?.limits.webhooks ?? null,
        enterprise: plans.enterprise?.limits.webhooks ?? null
      },
      endpointConcurrency: integer(env, "WEBHOOK_ENDPOINT_CONCURRENCY", 4, 1),
      developerConcurrency: integer(env, "WEBHOOK_DEVELOPER_CONCURRENCY", 16, 1),
      concurrency: integer(env, "WEBHOOK_CONCURRENCY", 50, 1)
    },
    compliance: { jobPollSeconds: positiveNumber(env, "COMPLIANCE_JOB_POLL_SECONDS", 5) },
    sso,
    oauth: oauthSettings(env, production, publicBaseUrl),
    anomalies: { intervalSeconds: positiveNumber(env, "ANOMALY_INTERVAL_SECONDS", 300) },
    breaches: {
      deadlineAlertsEnabled: env.DPDP_BREACH_DEADLINE_ALERTS_ENABLED === "true",
      alertLeadMinutes: integer(env, "DPDP_BREACH_ALERT_LEAD_MINUTES", 1440),
      alertIntervalSeconds: positiveNumber(env, "DPDP_BREACH_ALERT_INTERVAL_SECONDS", 300),
      grievanceAlertsEnabled: env.DPDP_GRIEVANCE_DEADLINE_ALERTS_ENABLED === "true",
      grievanceAlertLeadDays: integer(env, "DPDP_GRIEVANCE_ALERT_LEAD_DAYS", 10, 0),
      dpdpFiberIntervalSeconds: positiveNumber(env, "DPDP_FIBER_INTERVAL_SECONDS", 300)
    },
    rateLimits: {
      planFree: integer(env, "RATE_LIMIT_PLAN_FREE", 100, 1),
      planPro: integer(env, "RATE_LIMIT_PLAN_PRO", 500, 1),
      planEnterprise: integer(env, "RATE_LIMIT_PLAN_ENTERPRISE", 2000, 1),
      routeDefault: integer(env, "RATE_LIMIT_ROUTE_DEFAULT", 5000, 1),
      containment: integer(env, "RATE_LIMIT_CONTAINMENT", 2000, 1),
      revocationStatus: integer(env, "RATE_LIMIT_REVOCATION_STATUS", 6000, 1),
      authorizePerDeveloper: integer(env, "RATE_LIMIT_AUTHORIZE_PER_DEVELOPER", 10, 1),
      signupPerHour: integer(env, "RATE_LIMIT_SIGNUP_PER_HOUR", 10, 1),
      oauthTokenPerClient: integer(env, "RATE_LIMIT_OAUTH_TOKEN_PER_CLIENT", 120, 1),
      oauthRegisterPerDeveloper: integer(env, "RATE_LIMIT_OAUTH_REGISTER_PER_DEVELOPER", 1000, 1),
      oauthIntrospect: integer(env, "RATE_LIMIT_OAUTH_INTROSPECT", 6000, 1),
      scale: positiveNumber(env, "RATE_LIMIT_SCALE", 1)
    },
    policy: { backend: policyBackend, opaUrl, opaTimeoutMs: integer(env, "OPA_TIMEOUT_MS", 2000, 1) },
    plans,
    dnsResolver: env.DNS_RESOLVER?.trim() ? checkResolver(env.DNS_RESOLVER.trim()) : undefined,
    metricsToken: env.METRICS_TOKEN?.trim() || undefined,
    logLevel,
    dataDir,
    migrateOnStart: env.MIGRATE_ON_START !== "false",
    startupTimeoutSeconds: integer(env, "STARTUP_TIMEOUT_SECONDS", 60),
    redisKeyPrefix: env.REDIS_KEY_PREFIX?.trim() || "aas:",
    workersEnabled: env.WORKERS_ENABLED !== "false",
    signupEnabled: env.SIGNUP_ENABLED === undefined || env.SIGNUP_ENABLED === "" ? true : boolean(env, "SIGNUP_ENABLED"),
    otlpEndpoint: env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim()
      ? url("OTEL_EXPORTER_OTLP_ENDPOINT", env.OTEL_EXPORTER_OTLP_ENDPOINT.trim(), ["http:", "https:"]).replace(/\/+$/, "")
      : undefined,
    vc
  }
}
