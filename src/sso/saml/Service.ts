/**
 * SAML as an Effect service (decisions §12): the AuthnRequest URL, the ACS's Response check, the
 * connection test, the settings check of create/patch, and the SP metadata. node-saml runs inside
 * with a deadline (a Response's XML work is bounded, but nothing outside the service may hang on
 * it), every time comes from Effect's Clock, and a Response's assertion id is claimed once.
 * `SamlProtocolLive` is the core's `SamlProtocol` (src/sso/Protocol.ts) made of it.
 */
import { SqlClient } from "@effect/sql"
import { Context, Duration, Effect, Layer } from "effect"
import { Config } from "../../Config.ts"
import { BadRequest, SsoAuthFailed, SsoError } from "../../platform/Errors.ts"
import { checkReceiverUrl, resolvePublic } from "../../platform/Outbound.ts"
import { nowMillis } from "../../platform/Time.ts"
import type { Connection, SamlSettings } from "../Connections.ts"
import type { SsoIdentity } from "../Identity.ts"
import { SamlProtocol, type SamlProtocolService, type TestCheck } from "../Protocol.ts"
import { inspectCertificate, validityProblem } from "./Certificates.ts"
import { identityOf } from "./Identity.ts"
import { samlLibrariesLoaded } from "./Library.ts"
import { resolveSamlSettings, type ServiceProvider, serviceProviderFor, serviceProviderMetadataXml } from "./Metadata.ts"
import { claimAssertionId } from "./Replay.ts"
import { authnRequestUrl } from "./Request.ts"
import { checkSamlResponse } from "./Response.ts"

/** node-saml's work on one message (signature checks, canonicalisation) */
export const SAML_TIMEOUT = Duration.seconds(5)
/** the connection test's DNS look-up of the IdP's SSO host */
export const SAML_TEST_TIMEOUT = Duration.seconds(5)

export interface SamlServiceShape extends SamlProtocolService {
  /** a posted SAMLResponse for the request stored with the login state → the person's identity */
  readonly accept: (
    connection: Connection,
    input: { readonly samlResponse: string; readonly requestId: string }
  ) => Effect.Effect<SsoIdentity, SsoAuthFailed | SsoError>
  /** what an administrator pastes at the IdP (entity id, ACS URL) */
  readonly serviceProvider: (connectionId: string) => ServiceProvider
  readonly metadataXml: (connectionId: string) => Effect.Effect<string>
}

export class SamlService extends Context.Tag("agent-auth/SamlService")<SamlService, SamlServiceShape>() {}

const settingsOf = (connection: Connection) =>
  connection.protocol === "saml" && connection.saml !== null
    ? Effect.succeed(connection.saml)
    : Effect.fail(new SsoError({ message: "The connection is not a SAML connection" }))

/** node-saml's promise under a deadline; its failures are the provider's unless `refuse` says otherwise */
const bounded = <A>(what: string, run: () => Promise<A>) =>
  Effect.tryPromise({ try: run, catch: (e) => new SsoError({ message: `${what} failed: ${e instanceof Error ? e.message : String(e)}` }) }).pipe(
    Effect.timeoutFail({ duration: SAML_TIMEOUT, onTimeout: () => new SsoError({ message: `${what} timed out` }) })
  )

export const SamlServiceLive = Layer.effect(
  SamlService,
  Effect.gen(function*() {
    const config = yield* Config
    const sql = yield* SqlClient.SqlClient
    const allowPrivateHosts = config.sso.allowPrivateHosts
    const serviceProvider = (connectionId: string) => serviceProviderFor(config.publicBaseUrl, connectionId)

    const authorizeUrl: SamlServiceShape["authorizeUrl"] = (connection, input) =>
      Effect.gen(function*() {
        const settings = yield* settingsOf(connection)
        yield* samlLibrariesLoaded
        return yield* bounded("The SAML AuthnRequest", () => authnRequestUrl(settings, serviceProvider(connection.id), { relayState: input.state }))
      })

    const accept: SamlServiceShape["accept"] = (connection, input) =>
      Effect.gen(function*() {
        const settings = yield* settingsOf(connection)
        const nowMs = yield* nowMillis
        yield* samlLibrariesLoaded
        const outcome = yield* bounded("The SAML Response check", () =>
          checkSamlResponse({ samlResponse: input.samlResponse, settings, sp: serviceProvider(connection.id), requestId: input.requestId, nowMs }))
        if (!outcome.ok) {
          yield* Effect.logInfo("SAML Response refused").pipe(Effect.annotateLogs({ connectionId: connection.id, reason: outcome.reason }))
          return yield* Effect.fail(outcome.kind === "provider" ? new SsoError({ message: outcome.reason }) : new SsoAuthFailed({ message: outcome.reason }))
        }
        const claimed = yield* claimAssertionId({
          connectionId: connection.id,
          assertionId: outcome.assertion.assertionId,
          retainUntilMs: outcome.assertion.retainUntilMs,
          nowMs
        }).pipe(Effect.provideService(SqlClient.SqlClient, sql), Effect.orDie)
        if (!claimed) return yield* Effect.fail(new SsoAuthFailed({ message: "The SAML assertion was already used (replay)" }))
        const identity = identityOf(outcome.assertion, connection)
        // the core reads `email` as an address the provider vouches for (see Identity.ts)
        return {
          connectionId: connection.id,
          issuer: identity.issuer,
          subject: identity.subject,
          email: identity.emailVerified ? identity.email : null,
          emailVerified: identity.emailVerified,
          groups: identity.groups
        }
      })

    const settings: SamlServiceShape["settings"] = (input, current) =>
      Effect.flatMap(Effect.zipRight(samlLibrariesLoaded, nowMillis), (nowMs) => {
        const checked = resolveSamlSettings(input, { nowMs, allowPrivateHosts, current })
        if (checked.ok) return Effect.succeed<SamlSettings>({ ...checked.value, idpCertificates: [...checked.value.idpCertificates] })
        const message = checked.problems.map((p) => `${p.path}: ${p.message}`).join("; ")
        return Effect.fail(new BadRequest({ message, details: [...checked.problems] }))
      })

    /** what `POST /v1/sso/connections/:id/test` reports for SAML: the SSO URL and each certificate */
    const test: SamlServiceShape["test"] = (connection) =>
      Effect.gen(function*() {
        const settings = yield* settingsOf(connection)
        const nowMs = yield* nowMillis
        const checks: Array<TestCheck> = []
        const url = checkReceiverUrl(settings.idpSsoUrl, allowPrivateHosts)
        if (!url.ok) checks.push({ name: "idpSsoUrl", ok: false, detail: url.reason })
        else if (allowPrivateHosts) checks.push({ name: "idpSsoUrl", ok: true, detail: settings.idpSsoUrl })
        else {
          const resolved = yield* Effect.promise(() => resolvePublic(url.url.hostname)).pipe(
            Effect.timeoutTo({ duration: SAML_TEST_TIMEOUT, onSuccess: (r) => r, onTimeout: () => ({ ok: false as const, reason: "DNS look-up timed out" }) })
          )
          checks.push(resolved.ok
            ? { name: "idpSsoUrl", ok: true, detail: settings.idpSsoUrl }
            : { name: "idpSsoUrl", ok: false, detail: resolved.reason })
        }
        settings.idpCertificates.forEach((pem, i) => {
          const inspected = inspectCertificate(pem)
          if (!inspected.ok) return void checks.push({ name: `certificate[${i}]`, ok: false, detail: `The certificate ${inspected.reason}` })
          const problem = validityProblem(inspected.info, nowMs)
          const days = Math.floor((inspected.info.notAfter.getTime() - nowMs) / 86_400_000)
          checks.push({
            name: `certificate[${i}]`,
            ok: problem === undefined,
            detail: problem === undefined
              ? `${inspected.info.subject}, valid until ${inspected.info.notAfter.toISOString()} (${days} days)`
              : `${inspected.info.subject} ${problem}`
          })
        })
        return { ok: checks.every((c) => c.ok), checks }
      })

    return {
      authorizeUrl,
      test,
      settings,
      accept,
      serviceProvider,
      metadataXml: (connectionId) =>
        Effect.map(samlLibrariesLoaded, () => serviceProviderMetadataXml(serviceProvider(connectionId), connectionId))
    }
  })
)

export const SamlProtocolLive = Layer.effect(SamlProtocol, Effect.map(SamlService, (saml): SamlProtocolService => saml))
