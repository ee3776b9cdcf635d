/**
 * What passkeys tell anomaly detection (decisions §14 AD-011, §17): a port owned here, below
 * anomalies, and provided by anomalies in the composition root (src/Server.ts), so verifying an
 * assertion never imports the capability that raises alerts. A signal never fails its caller.
 */
import { Context, type Effect } from "effect"

export interface CounterRegression {
  readonly developerId: string
  readonly principalId: string
  /** the credential's id (`pk_…`), not the authenticator's credential id */
  readonly passkeyId: string
  readonly storedCounter: number
  readonly presentedCounter: number
  readonly authRequestId: string | null
}

export interface PasskeySignalsService {
  /** a genuine signature whose counter did not grow: a cloned authenticator */
  readonly counterRegressed: (signal: CounterRegression) => Effect.Effect<void>
}

export class PasskeySignals extends Context.Tag("agent-auth/PasskeySignals")<PasskeySignals, PasskeySignalsService>() {}
