/**
 * Which principal an identity provider's user is (decisions §12). The identity key is the
 * provider's (issuer, subject) under one connection, never the email. A known identity keeps the
 * principal it was linked to; a new one maps to the directory user whose externalId equals the
 * subject, else whose userName equals the verified email, else (with JIT provisioning) to a new
 * directory user created through the directory's own service (so it is provisioned like any SCIM
 * user: event, audit entry, principalId from the §11 attribute). A deactivated principal is refused.
 */
import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { Directory } from "../directory/Service.ts"
import { DirectoryPrincipals } from "../directory/Principals.ts"
import { URN } from "../directory/Scim.ts"
import { SsoAuthFailed } from "../platform/Errors.ts"
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
  /** only an email the provider vouches for (OIDC `email_verified: true`); else null */
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

export const SsoIdentitiesLive = Layer.effect(
  SsoIdentities,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const directory = yield* Directory
    const principals = yield* DirectoryPrincipals

    /** a new directory user for this identity (JIT): userName = the verified email, else the subject */
    const provision = (connection: Connection, identity: SsoIdentity) =>
      directory.createUser(connection.developerId, {
        schemas: [URN.user],
        userName: identity.email ?? identity.subject,
        externalId: identity.subject,
        active: true,
        ...(identity.email !== null ? { emails: [{ value: identity.email, primary: true, type: "work" }] } : {})
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
        if (principalId === undefined) {
          const found = yield* principals.findForSignIn(developerId, { externalId: identity.subject, userName: identity.email })
          if (found !== undefined) principalId = found.principalId
        }
        if (principalId === undefined) {
          if (!connection.jitProvisioning) {
            return yield* Effect.fail(refused("This person is not in the directory and the connection does not provision users"))
          }
          principalId = yield* provision(connection, identity)
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
