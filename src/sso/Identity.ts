/**
 * Which principal an identity provider's user is (decisions §12, revised). The identity key is
 * (connection, issuer, subject), never the email, and a linked identity keeps its directory user.
 * A first sign-in links to an existing directory user only through an email the provider verified
 * whose domain is one of this connection's `domains` (a domain belongs to one active connection of
 * the developer, so no other provider can assert it), equal to the user's userName or primary email.
 * Nothing else links: not the subject against externalId, not a NameID against userName. Otherwise
 * JIT provisioning creates a directory user named by that email, else `sso:<connectionId>:<subject>`,
 * a name no other provider and no bare principal id can hold. A deactivated principal is refused.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Directory } from "../directory/Service.ts"
import { DirectoryPrincipals } from "../directory/Principals.ts"
import { URN } from "../directory/Scim.ts"
import { SsoAuthFailed } from "../platform/Errors.ts"
import { sha256Hex } from "../platform/Hash.ts"
import { newId } from "../platform/Ids.ts"
import { nowMillis } from "../platform/Time.ts"
import type { Connection } from "./Connections.ts"

/** What a protocol established about the person (OIDC: verified ID token; SAML: verified assertion). */
export interface SsoIdentity {
  readonly connectionId: string
  /** OIDC `iss`; SAML the IdP entity id */
  readonly issuer: string
  /** OIDC `sub`; SAML the NameID */
  readonly subject: string
  /** only an email the provider vouches for (OIDC `email_verified: true`; SAML an in-domain attribute); else null */
  readonly email: string | null
  readonly emailVerified: boolean
  readonly groups: ReadonlyArray<string>
}

export interface ResolvedIdentity {
  readonly identityId: string
  readonly principalId: string
  readonly provisioned: boolean
}

export interface SsoIdentitiesService {
  readonly resolve: (connection: Connection, identity: SsoIdentity) => Effect.Effect<ResolvedIdentity, SsoAuthFailed>
}

export class SsoIdentities extends Context.Tag("agent-auth/SsoIdentities")<SsoIdentities, SsoIdentitiesService>() {}

const refused = (message: string) => new SsoAuthFailed({ message })

/** `sso:<connectionId>:<subject>`; a long subject by its hash, so the name fits a principal id (200 characters) */
export const jitName = (connectionId: string, subject: string) => {
  const name = `sso:${connectionId}:${subject}`
  return name.length <= 200 && subject.trim() === subject ? name : `sso:${connectionId}:sha256:${sha256Hex(subject)}`
}

/** the identity's email when it may find or name a directory user: verified, and of one of the connection's domains */
export const trustedEmail = (connection: Pick<Connection, "domains">, identity: Pick<SsoIdentity, "email" | "emailVerified">) => {
  if (identity.email === null || identity.emailVerified !== true) return null
  const email = identity.email.trim().toLowerCase()
  const at = email.lastIndexOf("@")
  if (at <= 0) return null
  const domain = email.slice(at + 1)
  return connection.domains.some((d) => d.toLowerCase() === domain) ? email : null
}

export const SsoIdentitiesLive = Layer.effect(
  SsoIdentities,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const directory = yield* Directory
    const principals = yield* DirectoryPrincipals

    /** a new directory user for this identity (JIT), named so that it cannot be another principal */
    const provision = (connection: Connection, identity: SsoIdentity, email: string | null) =>
      directory.createUser(connection.developerId, {
        schemas: [URN.user],
        userName: email ?? jitName(connection.id, identity.subject),
        externalId: jitName(connection.id, identity.subject),
        active: true,
        ...(email !== null ? { emails: [{ value: email, primary: true, type: "work" }] } : {})
      }).pipe(
        Effect.map((row) => row.principalId),
        Effect.catchTag("ScimError", (e) =>
          Effect.fail(refused(e.status === 409
            ? "A directory user with this user name already exists and is not linked to this identity"
            : `The directory refused the new user: ${e.detail}`)))
      )

    const resolve: SsoIdentitiesService["resolve"] = (connection, identity) =>
      Effect.gen(function*() {
        const developerId = connection.developerId
        const ms = yield* nowMillis
        const [link] = yield* sql<{ id: string; principalId: string }>`
          SELECT id, principal_id FROM sso_identities
          WHERE connection_id = ${connection.id} AND issuer = ${identity.issuer} AND subject = ${identity.subject}`.pipe(Effect.orDie)
        let principalId: string | undefined
        let provisioned = false
        if (link !== undefined) {
          const user = yield* principals.describe(developerId, link.principalId)
          // a linked principal whose directory user was deleted is looked up again (it may be provisioned anew)
          if (user !== undefined || !(yield* hasDirectory(developerId))) principalId = link.principalId
        }
        // only a verified email of one of this connection's domains speaks for a person (never another provider's)
        const email = trustedEmail(connection, identity)
        if (principalId === undefined && email !== null) {
          const found = yield* principals.findByVerifiedEmail(developerId, email)
          if (found.length > 1) return yield* Effect.fail(refused("Several directory users hold this email: ask an administrator"))
          principalId = found[0]
        }
        if (principalId === undefined) {
          if (!connection.jitProvisioning) {
            return yield* Effect.fail(refused("This person is not in the directory and the connection does not provision users"))
          }
          principalId = yield* provision(connection, identity, email)
          provisioned = true
        }
        if (yield* principals.isInactive(developerId, principalId)) {
          return yield* Effect.fail(refused("This person is deactivated in the directory"))
        }
        const identityId = link?.id ?? newId("ssoid", ms)
        yield* sql`INSERT INTO sso_identities (id, developer_id, connection_id, issuer, subject, principal_id, email, created_at, last_login_at)
                   VALUES (${identityId}, ${developerId}, ${connection.id}, ${identity.issuer}, ${identity.subject}, ${principalId},
                           ${identity.email}, ${new Date(ms)}, ${new Date(ms)})
                   ON CONFLICT (connection_id, issuer, subject)
                   DO UPDATE SET principal_id = EXCLUDED.principal_id, email = EXCLUDED.email, last_login_at = EXCLUDED.last_login_at`.pipe(Effect.orDie)
        return { identityId, principalId, provisioned }
      })

    /** whether the developer keeps a directory at all (else principals are named freely and links stand) */
    const hasDirectory = (developerId: string) =>
      sql`SELECT 1 FROM scim_users WHERE developer_id = ${developerId} AND deleted_at IS NULL LIMIT 1`.pipe(
        Effect.map((rows) => rows.length > 0),
        Effect.orDie
      )

    return { resolve }
  })
)
