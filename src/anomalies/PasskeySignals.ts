/**
 * AD-011 (decisions §14, revised): a passkey counter regression raises a high alert on the
 * credential, per principal, through the passkeys' own port (passkeys/Signals.ts), provided in
 * src/Server.ts. Each further regression of the same credential while the alert is open or
 * acknowledged is one more occurrence. Failures are logged and rolled back alone, never raised.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Layer } from "effect"
import { PasskeySignals } from "../passkeys/Signals.ts"
import { AnomalyCore } from "./Core.ts"

export const PasskeySignalsFromAnomalies = Layer.effect(
  PasskeySignals,
  Effect.gen(function*() {
    const core = yield* AnomalyCore
    const sql = yield* SqlClient.SqlClient
    return {
      counterRegressed: (s) =>
        Effect.gen(function*() {
          const view = yield* core.view(s.developerId)
          const rule = view.rule("AD-011")
          if (view.settings.mode === "off" || rule === undefined || !rule.enabled) return
          yield* sql.withTransaction(core.raise({
            developerId: s.developerId, rule, subject: s.passkeyId, agentId: null, principalId: s.principalId,
            description: `Passkey ${s.passkeyId} of principal ${s.principalId} presented signature counter ${s.presentedCounter}, ` +
              `not above the stored ${s.storedCounter} (a cloned authenticator?)`,
            context: { passkeyId: s.passkeyId, storedCounter: s.storedCounter, presentedCounter: s.presentedCounter, authRequestId: s.authRequestId },
            evidenceAt: new Date(0), inline: true
          }))
        }).pipe(
          Effect.catchAllCause((cause) =>
            Effect.logWarning("anomaly rule failed").pipe(Effect.annotateLogs({ ruleId: "AD-011", cause: String(cause).slice(0, 300) })))
        )
    }
  })
)
