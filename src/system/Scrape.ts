/**
 * The gauges /metrics reads at scrape time: the oldest pending webhook delivery's age, breaches open
 * and overdue. One statement, each part bounded by a partial index (sql/0020, sql/0005), and the
 * whole bounded by a timeout: a slow or absent database leaves the gauges out, never the scrape.
 */
import { SqlClient } from "@effect/sql"
import { Duration, Effect } from "effect"
import { BOARD_REPORT_HOURS } from "../breaches/Service.ts"
import type { Gauge } from "../platform/Metrics.ts"
import { nowMillis } from "../platform/Time.ts"

const SCRAPE_TIMEOUT = Duration.millis(500)

export const scrapeGauges = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const ms = yield* nowMillis
  const now = new Date(ms)
  const [row] = yield* sql<{ oldest: Date | null; open: string; overdue: string }>`
    SELECT
      (SELECT min(created_at) FROM webhook_deliveries WHERE status = 'pending') AS oldest,
      (SELECT count(*) FROM breaches WHERE status <> 'closed') AS open,
      (SELECT count(*) FROM breaches
        WHERE board_detailed_report_sent_at IS NULL AND status <> 'closed'
          AND CASE WHEN extension->>'granted' = 'true' AND extension->>'newDueAt' IS NOT NULL
                   THEN (extension->>'newDueAt')::timestamptz ELSE aware_at + make_interval(hours => ${BOARD_REPORT_HOURS}) END < ${now}) AS overdue`
  const oldest = row?.oldest == null ? 0 : Math.max(0, (ms - new Date(row.oldest).getTime()) / 1000)
  return [
    { name: "webhook_oldest_pending_delivery_age_seconds", help: "Age of the oldest webhook delivery still pending (0 when none)", value: oldest },
    { name: "breaches_open", help: "Breaches not closed", value: Number(row?.open ?? 0) },
    { name: "breaches_overdue", help: "Open breaches whose Board detailed report is past its due time", value: Number(row?.overdue ?? 0) }
  ] satisfies ReadonlyArray<Gauge>
}).pipe(
  Effect.timeout(SCRAPE_TIMEOUT),
  Effect.catchAllCause(() => Effect.succeed([] as ReadonlyArray<Gauge>))
)
