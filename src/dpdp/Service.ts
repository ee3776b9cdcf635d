/**
 * The DPDP capability (decisions §21) as one service: notices, consent records, withdrawal and
 * grievances, each built in its own file. Grants brings the one revocation path and the credentials
 * the §18 key that signs the consent proofs (both composed below it in src/Server.ts).
 */
import { Context, Effect, Layer } from "effect"
import { makeErasure } from "./Erasure.ts"
import { makeGrievances } from "./Grievances.ts"
import { makeNominations } from "./Nomination.ts"
import { makeNotices } from "./Notices.ts"
import { makeRecords } from "./Records.ts"
import { makeSettings } from "./Settings.ts"
import { makeWithdrawal } from "./Withdrawal.ts"

const make = Effect.gen(function*() {
  const notices = yield* makeNotices
  const records = yield* makeRecords(notices)
  const withdrawal = yield* makeWithdrawal
  const grievances = yield* makeGrievances
  const nominations = yield* makeNominations
  const erasure = yield* makeErasure
  const settings = yield* makeSettings
  return { notices, records, withdrawal, grievances, nominations, erasure, settings }
})

export class Dpdp extends Context.Tag("agent-auth/Dpdp")<Dpdp, Effect.Effect.Success<typeof make>>() {}

/** composed in src/Server.ts, over the grants it revokes through (decisions §20: no capability provides another's layer) */
export const DpdpLive = Layer.effect(Dpdp, make)
