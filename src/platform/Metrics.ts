/**
 * Metrics in Prometheus text format (GET /metrics): HTTP requests by route template and status,
 * latency histograms, the domain's own counters (grants, tokens, vault, offline entries, webhook
 * deliveries, rate-limit refusals), dependency probe latency, gauges read at scrape time, and
 * process figures. Routes are the router's templates (unmatched paths are one `unmatched` series),
 * and every label set is bounded, so the number of series stays bounded whatever the traffic.
 *
 * Domain counters are incremented in process where the thing happened, once its transaction
 * committed (see each call site).
 */
import { Context, Layer } from "effect"

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const MAX_SERIES = 2000
const PREFIX = "agent_auth_"

/** Every domain counter, with its help text: one table, so names cannot drift between call sites. */
export const COUNTERS = {
  grants_issued_total: "Grants issued",
  grants_revoked_total: "Grants revoked (a cascade counts each descendant)",
  tokens_verified_total: "Grant tokens checked online, by result (valid, invalid)",
  vault_exchanges_total: "Vault token exchanges by outcome",
  offline_entries_total: "Offline audit entries by result (accepted, rejected) and rejection code",
  webhook_deliveries_total: "Webhook delivery attempts by outcome (delivered, retrying, failed)",
  rate_limit_refusals_total: "Requests refused by a rate limit, by policy",
  replays_total: "Authorization codes and refresh tokens presented twice (their grant is revoked), by kind",
  breach_alerts_sent_total: "Breach deadline alerts sent, by kind",
  billing_close_failures_total: "Scheduled period closes that could not invoice every developer (the month stays open and is retried)"
} as const
export type CounterName = keyof typeof COUNTERS

export interface Gauge {
  readonly name: string
  readonly help: string
  readonly value: number
}

export interface MetricsService {
  readonly observe: (method: string, route: string, status: number, seconds: number) => void
  /** adds to a domain counter (labels: a small fixed set per counter) */
  readonly inc: (name: CounterName, labels?: Record<string, string>, by?: number) => void
  /** a dependency probe's latency (db, redis) */
  readonly probe: (dependency: string, ok: boolean, seconds: number) => void
  /** the text of every in-process metric, plus gauges read at scrape time */
  readonly render: (gauges?: ReadonlyArray<Gauge>) => string
}

export class Metrics extends Context.Tag("agent-auth/Metrics")<Metrics, MetricsService>() {}

/** the route label of every request no route matched */
export const UNMATCHED = "unmatched"

/** A path reduced to a template when no route template is known (ids → :id). */
export const templateOf = (path: string): string =>
  path === UNMATCHED ? path : path
    .split("/")
    .map((segment) =>
      /^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$/.test(segment) || /^\d+$/.test(segment) || segment.length > 40 ? ":id" : segment
    )
    .join("/")

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

const labelText = (labels: Record<string, string> | undefined) => {
  if (labels === undefined) return ""
  const parts: Array<string> = []
  for (const key in labels) parts.push(`${key}="${escapeLabel(labels[key]!)}"`)
  return parts.join(",")
}

interface Histogram {
  buckets: Array<number>
  sum: number
  count: number
}

const newHistogram = (): Histogram => ({ buckets: BUCKETS.map(() => 0), sum: 0, count: 0 })

const record = (h: Histogram, seconds: number) => {
  for (let i = 0; i < BUCKETS.length; i++) if (seconds <= BUCKETS[i]!) h.buckets[i]!++
  h.sum += seconds
  h.count++
}

const renderHistogram = (lines: Array<string>, name: string, labels: string, h: Histogram) => {
  const sep = labels === "" ? "" : ","
  BUCKETS.forEach((b, i) => lines.push(`${name}_bucket{${labels}${sep}le="${b}"} ${h.buckets[i]}`))
  lines.push(`${name}_bucket{${labels}${sep}le="+Inf"} ${h.count}`)
  lines.push(`${name}_sum${labels === "" ? "" : `{${labels}}`} ${h.sum}`)
  lines.push(`${name}_count${labels === "" ? "" : `{${labels}}`} ${h.count}`)
}

export const makeMetrics = (): MetricsService => {
  const counts = new Map<string, number>()
  const histograms = new Map<string, Histogram>()
  const domain = new Map<CounterName, Map<string, number>>()
  const probes = new Map<string, Histogram>()
  const startedAt = Date.now()
  return {
    observe: (method, route, status, seconds) => {
      const countKey = `${method}\u0000${route}\u0000${status}`
      if (counts.size < MAX_SERIES || counts.has(countKey)) counts.set(countKey, (counts.get(countKey) ?? 0) + 1)
      const histKey = `${method}\u0000${route}`
      let h = histograms.get(histKey)
      if (h === undefined) {
        if (histograms.size >= MAX_SERIES) return
        h = newHistogram()
        histograms.set(histKey, h)
      }
      record(h, seconds)
    },
    inc: (name, labels, by = 1) => {
      let series = domain.get(name)
      if (series === undefined) domain.set(name, series = new Map())
      const key = labelText(labels)
      if (series.size < MAX_SERIES || series.has(key)) series.set(key, (series.get(key) ?? 0) + by)
    },
    probe: (dependency, ok, seconds) => {
      const key = labelText({ dependency, result: ok ? "ok" : "failed" })
      let h = probes.get(key)
      if (h === undefined) probes.set(key, h = newHistogram())
      record(h, seconds)
    },
    render: (gauges = []) => {
      const lines: Array<string> = []
      lines.push(`# HELP ${PREFIX}http_requests_total HTTP requests by method, route template and status`)
      lines.push(`# TYPE ${PREFIX}http_requests_total counter`)
      for (const [key, value] of counts) {
        const [method, route, status] = key.split("\u0000")
        lines.push(`${PREFIX}http_requests_total{method="${method}",route="${escapeLabel(route!)}",status="${status}"} ${value}`)
      }
      lines.push(`# HELP ${PREFIX}http_request_duration_seconds HTTP request latency by method and route template`)
      lines.push(`# TYPE ${PREFIX}http_request_duration_seconds histogram`)
      for (const [key, h] of histograms) {
        const [method, route] = key.split("\u0000")
        renderHistogram(lines, `${PREFIX}http_request_duration_seconds`, `method="${method}",route="${escapeLabel(route!)}"`, h)
      }
      for (const name of Object.keys(COUNTERS) as Array<CounterName>) {
        lines.push(`# HELP ${PREFIX}${name} ${COUNTERS[name]}`, `# TYPE ${PREFIX}${name} counter`)
        const series = domain.get(name)
        if (series === undefined || series.size === 0) {
          // an unlabelled zero, so a dashboard's query finds the series before the first event
          lines.push(`${PREFIX}${name} 0`)
          continue
        }
        for (const [labels, value] of series) lines.push(`${PREFIX}${name}${labels === "" ? "" : `{${labels}}`} ${value}`)
      }
      lines.push(`# HELP ${PREFIX}dependency_probe_duration_seconds Latency of database and Redis probes`)
      lines.push(`# TYPE ${PREFIX}dependency_probe_duration_seconds histogram`)
      for (const [labels, h] of probes) renderHistogram(lines, `${PREFIX}dependency_probe_duration_seconds`, labels, h)
      for (const g of gauges) {
        lines.push(`# HELP ${PREFIX}${g.name} ${g.help}`, `# TYPE ${PREFIX}${g.name} gauge`, `${PREFIX}${g.name} ${g.value}`)
      }
      const mem = process.memoryUsage()
      lines.push("# TYPE process_resident_memory_bytes gauge", `process_resident_memory_bytes ${mem.rss}`)
      lines.push("# TYPE process_heap_used_bytes gauge", `process_heap_used_bytes ${mem.heapUsed}`)
      lines.push("# TYPE process_uptime_seconds gauge", `process_uptime_seconds ${(Date.now() - startedAt) / 1000}`)
      const cpu = process.cpuUsage()
      lines.push("# TYPE process_cpu_seconds_total counter", `process_cpu_seconds_total ${(cpu.user + cpu.system) / 1e6}`)
      return lines.join("\n") + "\n"
    }
  }
}

export const MetricsLive = Layer.sync(Metrics, makeMetrics)
