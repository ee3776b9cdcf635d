/**
 * The passkeys' approval port (src/passkeys/Approval.ts), provided by authorization: reading a
 * pending request and approving it once a passkey assertion verified (decisions §9, §20).
 */
import { Effect, Layer } from "effect"
import { Approval } from "../passkeys/Approval.ts"
import { Authorization } from "./Service.ts"

/** Delegates to the authorization capability, which owns requests, grants and codes. */
export const ApprovalLive = Layer.effect(
  Approval,
  Effect.map(Authorization, (authorization) => ({
    getPendingRequest: (authRequestId) => authorization.getPendingRequest(authRequestId),
    // the person's passkey assertion answers; no cookie of the starting browser is asked
    approveRequest: (authRequestId, options) => authorization.approveRequest(authRequestId, { ...options, browser: "passkey" })
  }))
)
