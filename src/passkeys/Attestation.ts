/**
 * Attestation policy (decisions §17): per developer, `attestation: "none"` (default) or `"direct"`,
 * an optional AAGUID allow-list and an optional backup-eligibility requirement.
 *
 * An AAGUID in an attestation only means something when the attestation chains to a trust anchor,
 * so an allow-list is accepted only when the service has local anchors (WEBAUTHN_ATTESTATION_ROOTS
 * or WEBAUTHN_MDS_STATEMENTS; the FIDO metadata service cannot be reached), and a registration under
 * it must carry a certificate chain (no "none", no self attestation) that the library verified
 * against those anchors.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { AppConfig } from "../Config.ts"
import { AttestationAnchorsRequired, BadRequest } from "../platform/Errors.ts"
import { normaliseAaguid } from "./Aaguids.ts"
import { webauthn } from "./Library.ts"

export interface AttestationPolicy {
  readonly attestation: "none" | "direct"
  readonly allowedAaguids: ReadonlyArray<string> | null
  readonly requireBackupEligible: boolean
  readonly updatedAt: string | null
}

export const DEFAULT_POLICY: AttestationPolicy = { attestation: "none", allowedAaguids: null, requireBackupEligible: false, updatedAt: null }

/** the attestation formats that carry a certificate chain */
const CHAINED_FORMATS = ["packed", "fido-u2f", "android-key", "tpm", "apple"] as const

let configuredFor: AppConfig["webauthnTrust"] | undefined

/**
 * Hands the local anchors to the library (process-wide settings): the roots are added to the
 * library's own for every chained format, and the statements are served by its metadata service
 * without any download.
 */
export const configureTrustAnchors = (trust: AppConfig["webauthnTrust"]) =>
  Effect.promise(async () => {
    if (configuredFor === trust) return
    configuredFor = trust
    if (!hasAnchors(trust)) return
    const { MetadataService, SettingsService } = await webauthn()
    if (trust.roots.length > 0) {
      for (const identifier of CHAINED_FORMATS) {
        const existing = SettingsService.getRootCertificates({ identifier })
        SettingsService.setRootCertificates({ identifier, certificates: [...new Set([...existing, ...trust.roots])] })
      }
    }
    if (trust.statements.length > 0) {
      await MetadataService.initialize({ mdsServers: [], statements: trust.statements as any, verificationMode: "permissive" })
    }
  })

export const hasAnchors = (trust: AppConfig["webauthnTrust"]) => trust.roots.length > 0 || trust.statements.length > 0

export const makePolicyStore = (sql: SqlClient.SqlClient, trust: AppConfig["webauthnTrust"]) => {
  const get = (developerId: string) =>
    sql<{ attestation: "none" | "direct"; allowedAaguids: ReadonlyArray<string> | null; requireBackupEligible: boolean; updatedAt: Date }>`
      SELECT attestation, allowed_aaguids, require_backup_eligible, updated_at FROM webauthn_policies WHERE developer_id = ${developerId}`.pipe(
      Effect.map((rows): AttestationPolicy => {
        const row = rows[0]
        if (row === undefined) return DEFAULT_POLICY
        return {
          attestation: row.attestation,
          allowedAaguids: row.allowedAaguids === null ? null : [...row.allowedAaguids],
          requireBackupEligible: row.requireBackupEligible,
          updatedAt: row.updatedAt.toISOString()
        }
      }),
      Effect.orDie
    )

  const put = (
    developerId: string,
    input: { readonly attestation?: "none" | "direct" | undefined; readonly allowedAaguids?: ReadonlyArray<string> | null | undefined; readonly requireBackupEligible?: boolean | undefined },
    at: Date
  ) =>
    Effect.gen(function*() {
      const aaguids = input.allowedAaguids === undefined || input.allowedAaguids === null ? null : input.allowedAaguids.map(normaliseAaguid)
      if (aaguids !== null && aaguids.some((a) => a === undefined)) {
        return yield* Effect.fail(new BadRequest({
          message: "allowedAaguids must be AAGUIDs (8-4-4-4-12 hexadecimal)",
          details: [{ path: "allowedAaguids", message: "AAGUIDs" }]
        }))
      }
      const attestation = input.attestation ?? "none"
      if (aaguids !== null && aaguids.length > 0) {
        if (!hasAnchors(trust)) {
          return yield* Effect.fail(new AttestationAnchorsRequired({
            message: "An AAGUID allow-list needs trust anchors: set WEBAUTHN_ATTESTATION_ROOTS or WEBAUTHN_MDS_STATEMENTS"
          }))
        }
        if (attestation !== "direct") {
          return yield* Effect.fail(new BadRequest({
            message: "An AAGUID allow-list needs attestation \"direct\"",
            details: [{ path: "attestation", message: "must be direct with allowedAaguids" }]
          }))
        }
      }
      const list = aaguids === null || aaguids.length === 0 ? null : [...new Set(aaguids as Array<string>)]
      yield* sql`INSERT INTO webauthn_policies (developer_id, attestation, allowed_aaguids, require_backup_eligible, updated_at)
                 VALUES (${developerId}, ${attestation}, ${list as any}, ${input.requireBackupEligible ?? false}, ${at})
                 ON CONFLICT (developer_id) DO UPDATE SET attestation = EXCLUDED.attestation,
                   allowed_aaguids = EXCLUDED.allowed_aaguids, require_backup_eligible = EXCLUDED.require_backup_eligible,
                   updated_at = EXCLUDED.updated_at`.pipe(Effect.orDie)
      return { attestation, allowedAaguids: list, requireBackupEligible: input.requireBackupEligible ?? false, updatedAt: at.toISOString() }
    })

  return { get, put }
}

/** why a verified registration is refused by the policy, or undefined when it is allowed */
export const policyRefusal = (
  policy: AttestationPolicy,
  registration: { readonly fmt: string; readonly aaguid: string; readonly backupEligible: boolean; readonly chained: boolean }
): string | undefined => {
  if (policy.requireBackupEligible && !registration.backupEligible) return "this developer accepts only passkeys that can be backed up (synced)"
  if (policy.allowedAaguids !== null && policy.allowedAaguids.length > 0) {
    if (registration.fmt === "none" || !registration.chained) return "an attested authenticator is required (a certificate chain to a trusted root)"
    if (!policy.allowedAaguids.includes(registration.aaguid.toLowerCase())) return "this authenticator model is not allowed"
  }
  return undefined
}
