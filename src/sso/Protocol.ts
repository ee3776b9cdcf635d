/**
 * What the SSO core asks of the SAML side (SSO-CONTRACT.md): the AuthnRequest URL for a login
 * (HTTP-Redirect binding, RelayState = our state), the connection test, and the validation of the
 * SAML fields of a connection being created or changed. The core calls these from `GET /sso/login`,
 * `POST /v1/sso/connections/:id/test` and the connections' create/patch path; src/sso/saml/Service.ts
 * provides the layer (SamlProtocolLive).
 */
import { Context, type Effect } from "effect"
import type { BadRequest, SsoError } from "../platform/Errors.ts"
import type { Connection, SamlSettings } from "./Connections.ts"

export interface TestCheck {
  readonly name: string
  readonly ok: boolean
  readonly detail?: string
}

/** What a create or patch body may carry for SAML: metadata XML, or the three explicit fields. */
export interface SamlInput {
  readonly idpMetadataXml?: string | undefined
  readonly idpEntityId?: string | undefined
  readonly idpSsoUrl?: string | undefined
  readonly idpCertificates?: ReadonlyArray<string> | undefined
}

export interface SamlProtocolService {
  readonly authorizeUrl: (
    connection: Connection,
    input: { readonly state: string; readonly loginHint?: string | undefined }
  ) => Effect.Effect<{ readonly url: string; readonly requestId: string }, SsoError>
  readonly test: (connection: Connection) => Effect.Effect<{ readonly ok: boolean; readonly checks: ReadonlyArray<TestCheck> }, SsoError>
  /**
   * The SAML settings a create (no `current`) or patch (`current` = stored settings) leads to;
   * BadRequest (400, with details) when they are not usable.
   */
  readonly settings: (input: SamlInput, current: SamlSettings | null) => Effect.Effect<SamlSettings, BadRequest>
}

export class SamlProtocol extends Context.Tag("agent-auth/SamlProtocol")<SamlProtocol, SamlProtocolService>() {}
