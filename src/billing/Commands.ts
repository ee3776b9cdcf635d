/** Operator commands of billing (decisions §16): close a month, mark an invoice paid. */
import { Effect } from "effect"
import type { OperatorCommand as Command } from "../platform/OperatorCommand.ts"
import { EventsLive } from "../platform/Events.ts"
import { nowMillis } from "../platform/Time.ts"
import { closePeriod, markPaid, previousPeriodStart } from "./Invoices.ts"
import { parsePeriod } from "./Plans.ts"

const closePeriodCommand: Command = (args) =>
  Effect.gen(function*() {
    const flag = args.indexOf("--period")
    const label = flag >= 0 ? args[flag + 1] : undefined
    if ((flag >= 0 && label === undefined) || args.length > (flag >= 0 ? 2 : 0)) {
      return yield* Effect.fail(new Error("usage: agent-auth billing close-period [--period YYYY-MM]"))
    }
    const period = label === undefined ? undefined : parsePeriod(label)
    if (label !== undefined && period === undefined) return yield* Effect.fail(new Error("--period must look like YYYY-MM"))
    const start = period?.start ?? previousPeriodStart(yield* nowMillis)
    const outcome = yield* closePeriod(start).pipe(
      Effect.provide(EventsLive),
      Effect.mapError((e) => new Error(`database error: ${e.message}`))
    )
    switch (outcome.status) {
      case "closed": return `closed ${outcome.period}: ${outcome.invoices} invoice(s) issued`
      case "already-closed": return `${outcome.period} was already closed: ${outcome.invoices} invoice(s)`
      case "busy": return yield* Effect.fail(new Error(`${outcome.period} is being closed by another instance; run again to see the result`))
      case "not-ended": return yield* Effect.fail(new Error(`${outcome.period} has not ended yet; only a month that has ended can be closed`))
      case "failed":
        return yield* Effect.fail(new Error(
          `${outcome.period} could not be closed (${outcome.invoices} invoice(s) issued so far; it stays open and is retried): ${outcome.errors.join("; ")}`
        ))
    }
  })

const markPaidCommand: Command = ([invoiceId]) =>
  Effect.gen(function*() {
    if (invoiceId === undefined) return yield* Effect.fail(new Error("usage: agent-auth billing mark-paid <invoiceId>"))
    const ok = yield* markPaid(invoiceId).pipe(Effect.mapError((e) => new Error(`database error: ${e.message}`)))
    if (!ok) return yield* Effect.fail(new Error(`no open invoice ${invoiceId}`))
    return `invoice ${invoiceId} is paid`
  })

export const billingCommands: Record<string, Command> = {
  "billing close-period": closePeriodCommand,
  "billing mark-paid": markPaidCommand
}

