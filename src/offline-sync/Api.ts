/** Offline audit sync: devices upload the signed, hash-chained entries they wrote offline. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Authentication } from "../platform/Auth.ts"
import { ApiKeyRouteErrors, BodyErrors, BundleNotFound, InvalidRequest } from "../platform/Errors.ts"
import { RatePolicy } from "../platform/RateLimit.ts"
import { documented } from "../platform/OperationDocs.ts"
import { OFFLINE_SYNC_DOCS } from "./Docs.ts"

export const SyncResult = Schema.Struct({
  accepted: Schema.Number,
  rejected: Schema.Number,
  revocationStatus: Schema.Literal("active", "revoked"),
  revokedAt: Schema.NullOr(Schema.String),
  errors: Schema.Array(Schema.Struct({ seq: Schema.Number, code: Schema.String, message: Schema.String }))
})

export class OfflineSyncApi extends HttpApiGroup.make("offlineSync")
  .add(
    HttpApiEndpoint.post("sync", "/v1/audit/offline-sync")
      // Checked by hand (decisions §5): the entry count is refused with 413 before the entries are validated.
      .setPayload(Schema.Unknown.annotations({ description: "{ bundleId: string, entries: SignedAuditEntry[] (at most 1000) }" }))
      .addSuccess(SyncResult)
      .addError(InvalidRequest)
      .addError(BodyErrors)
      .addError(BundleNotFound)
      .middleware(Authentication)
      .addError(ApiKeyRouteErrors)
      .annotate(RatePolicy, { routeLimit: 20, routeKey: "apiKey" })
  )
  .pipe(documented(OFFLINE_SYNC_DOCS))
{}
