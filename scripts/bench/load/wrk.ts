/**
 * The load generator of the HTTP benchmarks: `wrk` (Debian's package), a process of its own, driving
 * a list of requests taken in turn (a Lua script reads them from a file: paths, headers and bodies
 * may differ from one request to the next). The service's (or floor's) CPU is read from
 * /proc/<pid>/stat around the run, all its threads counted, so CPU per request is the process's own.
 */
import { spawnSync } from "node:child_process"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export interface Req {
  readonly method?: string
  readonly path: string
  readonly headers?: Record<string, string>
  readonly body?: string
}

/** A server to load: its base URL, the requests (taken in turn) and the process whose CPU counts. */
export interface Target {
  readonly url: string
  readonly requests: ReadonlyArray<Req>
  /** the process serving the requests (the service's child, or this process for a floor) */
  readonly pid: number
  /** a text every good answer's body contains (checked in wrk's Lua; off when absent: status only) */
  readonly expectBody?: string
}

export interface WrkResult {
  readonly requests: number
  readonly perSecond: number
  readonly p50Ms: number
  readonly p99Ms: number
  /** socket errors, timeouts, statuses ≥ 400 and bodies without the expected text */
  readonly errors: number
  /** CPU ms of the serving process over the run (all its threads) */
  readonly processMs: number
  /** CPU ms of the whole machine over the run (every process: PostgreSQL, Redis, wrk, others) */
  readonly machineMs: number
  /** CPU ms of wrk itself */
  readonly generatorMs: number
}

/** wrk's path, or a clear way to get it */
export const wrkPath = () => {
  const found = process.env.BENCH_WRK ?? ["/usr/bin/wrk", "/usr/local/bin/wrk"].find((p) => existsSync(p)) ??
    (spawnSync("sh", ["-c", "command -v wrk"], { encoding: "utf8" }).stdout.trim() || undefined)
  if (found === undefined || !existsSync(found)) {
    throw new Error("the benchmarks' load generator `wrk` is not installed: `apt-get install -y wrk` (Debian/Ubuntu), " +
      "`brew install wrk` (macOS), or build it from https://github.com/wg/wrk; BENCH_WRK=/path/to/wrk names another")
  }
  return found
}

const ticks = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")
  return Number(f[11]) + Number(f[12]) // utime + stime of every thread, USER_HZ (100/s)
}
const machineTicks = () => {
  const f = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number)
  return f[0]! + f[1]! + f[2]! + f[5]! + f[6]!
}

const luaString = (s: string) => `"${[...Buffer.from(s)].map((b) => (b >= 32 && b < 127 && b !== 34 && b !== 92 ? String.fromCharCode(b) : `\\${b}`)).join("")}"`

const script = (file: string, expectBody: string | undefined) => `
local reqs, n, i = {}, 0, 0
bad = 0
function init(args)
  local f = assert(io.open(${luaString(file)}, "rb"))
  local data = f:read("*a")
  f:close()
  for rec in string.gmatch(data, "([^%z]+)") do n = n + 1; reqs[n] = rec end
  i = (tonumber(id) or 0) * 7919 % n
end
function request()
  i = i % n + 1
  return reqs[i]
end
${expectBody === undefined ? "" : `local marker = ${luaString(expectBody)}
function response(status, headers, body)
  if status >= 400 or body == nil or not string.find(body, marker, 1, true) then bad = bad + 1 end
end`}
local threads = {}
local k = 0
function setup(thread)
  thread:set("id", k)
  k = k + 1
  table.insert(threads, thread)
end
function done(summary, latency, requests)
  local b = 0
  for _, t in ipairs(threads) do b = b + (t:get("bad") or 0) end
  local e = summary.errors
  io.write(string.format('WRK_JSON {"requests":%d,"durationUs":%d,"socket":%d,"status":%d,"timeout":%d,"bad":%d,"p50":%d,"p99":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write, e.status, e.timeout, b,
    latency:percentile(50), latency:percentile(99)))
end
`

const raw = (base: URL, r: Req) => {
  const body = r.body === undefined ? undefined : Buffer.from(r.body)
  const headers = { host: base.host, ...(r.headers ?? {}), ...(body === undefined ? {} : { "content-length": String(body.length) }) }
  return `${r.method ?? "GET"} ${r.path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n${body?.toString() ?? ""}`
}

/**
 * Runs wrk against `target` for `seconds` (whole seconds, at least 1) with `connections` in flight
 * (16, as every benchmark here) on `threads` (1: on 2 cores one wrk thread leaves the most to the
 * service; BENCH_WRK_THREADS to change).
 */
export const wrk = async (target: Target, options: { seconds?: number; connections?: number; threads?: number } = {}): Promise<WrkResult> => {
  const dir = mkdtempSync(join(tmpdir(), "aas-wrk-"))
  try {
    const base = new URL(target.url)
    const file = join(dir, "requests")
    writeFileSync(file, target.requests.map((r) => raw(base, r)).join("\0"))
    writeFileSync(join(dir, "script.lua"), script(file, target.expectBody))
    const seconds = Math.max(1, Math.round(options.seconds ?? 2))
    const connections = options.connections ?? 16
    const threads = Math.min(connections, options.threads ?? Number(process.env.BENCH_WRK_THREADS ?? 1))
    const p0 = ticks(target.pid), m0 = machineTicks()
    // asynchronous: a floor served by this process must go on answering while wrk runs
    const run = Bun.spawn([wrkPath(), "-t", String(threads), "-c", String(connections), "-d", `${seconds}s`, "--timeout", "10s",
      "-s", join(dir, "script.lua"), target.url], { stdout: "pipe", stderr: "pipe" })
    const [out, err, exitCode] = await Promise.all([new Response(run.stdout).text(), new Response(run.stderr).text(), run.exited])
    const p1 = ticks(target.pid), m1 = machineTicks()
    const line = /WRK_JSON (\{.*\})/.exec(out)?.[1]
    if (exitCode !== 0 || line === undefined) throw new Error(`wrk failed (${exitCode}): ${err}${out}`)
    const j = JSON.parse(line) as { requests: number; durationUs: number; socket: number; status: number; timeout: number; bad: number; p50: number; p99: number }
    const usage = run.resourceUsage()
    const generatorMs = usage === undefined ? NaN : Number(usage.cpuTime.user + usage.cpuTime.system) / 1000
    return {
      requests: j.requests,
      perSecond: Math.round(j.requests / (j.durationUs / 1e6)),
      p50Ms: Number((j.p50 / 1000).toFixed(2)),
      p99Ms: Number((j.p99 / 1000).toFixed(2)),
      errors: j.socket + j.timeout + (target.expectBody === undefined ? j.status : Math.max(j.status, j.bad)),
      processMs: (p1 - p0) * 10,
      machineMs: (m1 - m0) * 10,
      generatorMs
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
