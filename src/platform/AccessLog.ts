/**
 * What every request leaves behind once answered: its metrics sample and one access line
 * (method, route template, status, duration, request id, client address after TRUST_PROXY, developer
 * id when known). The route is the
 * router's template, never the raw path, so no id, query string or token reaches the log; with
 * LOG_LEVEL above info the line is never built.
 */
import type { GateState } from "./Auth.ts"
import { type LogService } from "./Log.ts"
import { type MetricsService, templateOf, UNMATCHED } from "./Metrics.ts"

export const recordRequest = (
  metrics: MetricsService,
  log: LogService | undefined,
  method: string,
  path: string,
  state: GateState | undefined,
  status: number,
  seconds: number
) => {
  // a path no route serves is one series, whatever was asked for
  const route = state?.route ?? (state?.unmatched && status >= 400 ? UNMATCHED : templateOf(path))
  metrics.observe(method, route, status, seconds)
  if (log !== undefined && log.enabled("info")) {
    log.write("info", "request", {
      method,
      route,
      status,
      durationMs: Math.round(seconds * 100000) / 100,
      requestId: state?.requestId,
      client: state?.client?.(),
      developerId: state?.developer?.id ?? state?.grant?.dev
    })
  }
}
