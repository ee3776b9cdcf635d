/**
 * Request metrics in Prometheus text format (GET /metrics): counts by route and status, latency
 * histograms by route, and process figures. Paths are reduced to templates (ids → :id) so the
 * number of series stays bounded whatever the traffic.
 */
import { Context, Layer } from "effect"

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
const MAX_SERIES = 2000

export interface MetricsService {
  readonly observe: (method: string, path: string, status: number, seconds: number) => void
  readonly render: () => string
}

export class Metrics extends Context.Tag("agent-auth/Metrics")<Metrics, MetricsService>() {}

/** the route label of every request no route matched */
export const UNMATCHED = "unmatched"

const templateOf = (path: string): string =>
  path === UNMATCHED ? path : path
    .split("/")
    .map((segment) =>
      /^[a-z]+_[0-9A-HJKMNP-TV-Z]{26}$/.test(segment) || /^\d+$/.test(segment) || segment.length > 40 ? ":id" : segment
    )
    .join("/")

const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

export const makeMetrics = (): MetricsService => {
  const counts = new Map<string, number>()
  const histograms = new Map<string, { buckets: Array<number>; sum: number; count: number }>()
  const startedAt = Date.now()
  return {
    observe: (method, path, status, seconds) => {
      const route = templateOf(path)
      const countKey = `${method}\u0000${route}\u0000${status}`
      if (counts.size < MAX_SERIES || counts.has(countKey)) counts.set(countKey, (counts.get(countKey) ?? 0) + 1)
      const histKey = `${method}\u0000${route}`
      let h = histograms.get(histKey)
      if (h === undefined) {
        if (histograms.size >= MAX_SERIES) return
        h = { buckets: BUCKETS.map(() => 0), sum: 0, count: 0 }
        histograms.set(histKey, h)
      }
      for (let i = 0; i < BUCKETS.length; i++) if (seconds <= BUCKETS[i]!) h.buckets[i]!++
      h.sum += seconds
      h.count++
    },
    render: () => {
      const lines: Array<string> = []
      lines.push("# HELP http_requests_total HTTP requests by route and status")
      lines.push("# TYPE http_requests_total counter")
      for (const [key, value] of counts) {
        const [method, route, status] = key.split("\u0000")
        lines.push(`http_requests_total{method="${method}",route="${escapeLabel(route!)}",status="${status}"} ${value}`)
      }
      lines.push("# HELP http_request_duration_seconds HTTP request latency by route")
      lines.push("# TYPE http_request_duration_seconds histogram")
      for (const [key, h] of histograms) {
        const [method, route] = key.split("\u0000")
        const labels = `method="${method}",route="${escapeLabel(route!)}"`
        BUCKETS.forEach((b, i) => lines.push(`http_request_duration_seconds_bucket{${labels},le="${b}"} ${h.buckets[i]}`))
        lines.push(`http_request_duration_seconds_bucket{${labels},le="+Inf"} ${h.count}`)
        lines.push(`http_request_duration_seconds_sum{${labels}} ${h.sum}`)
        lines.push(`http_request_duration_seconds_count{${labels}} ${h.count}`)
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
