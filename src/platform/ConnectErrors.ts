/**
 * Why a connection at start failed, in one line an operator can act on: refused, unknown host,
 * authentication failed, database does not exist, timed out. The URL is named by host, port and
 * database only (never its password).
 */
export class ConnectFailure extends Error {
  readonly _tag = "ConnectFailure"
  /** whether waiting may fix it (refused, timed out): start-up then exits 75, not 1 */
  constructor(message: string, readonly transient = false) {
    super(message)
  }
}

export const where = (url: string, defaultPort = "5432"): string => {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || defaultPort}${u.pathname.length > 1 ? u.pathname : ""}`
  } catch {
    return "the configured server"
  }
}

/** The reason in PostgreSQL's and Node's own terms (SQLSTATE, errno), as plain words. */
export const postgresReason = (cause: unknown): string => {
  const e = cause as { code?: string; message?: string; cause?: unknown } | undefined
  const code = String(e?.code ?? "")
  const message = String(e?.message ?? "")
  if (code === "ECONNREFUSED") return "connection refused (is PostgreSQL running and listening there?)"
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || /getaddrinfo|ENOTFOUND|could not resolve/i.test(message)) return "unknown host"
  if (code === "28P01" || /password authentication failed/i.test(message)) return "authentication failed (check the user name and password)"
  if (code === "28000") return `authentication failed (${message.split("\n")[0]})`
  if (code === "3D000" || /database .* does not exist/i.test(message)) return "database does not exist"
  if (code === "ETIMEDOUT" || /timeout/i.test(message)) return "timed out"
  if (code === "EHOSTUNREACH" || code === "ENETUNREACH") return "host unreachable"
  if (e?.cause !== undefined && e.cause !== cause) return postgresReason(e.cause)
  return message.split("\n")[0] || "connection failed"
}

export const postgresConnectFailure = (url: string, error: unknown): ConnectFailure => {
  const cause = (error as { cause?: unknown })?.cause ?? error
  return new ConnectFailure(`DATABASE_URL: cannot connect to ${where(url)}: ${postgresReason(cause)}`, isTransientPostgresFailure(cause))
}

/** socket errors a server that is starting, restarting or briefly unreachable gives */
const TRANSIENT_ERRNO = /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EAI_AGAIN|EPIPE)$/

/**
 * Whether waiting may fix a failed connection: refused, reset, timed out, unreachable, PostgreSQL
 * starting up or shutting down (57P0x), too many connections (53300). A wrong password, a missing
 * database or an unknown host will not fix themselves.
 */
export const isTransientPostgresFailure = (cause: unknown): boolean => {
  const e = cause as { code?: string; message?: string; cause?: unknown; errors?: Array<unknown> } | undefined
  const code = String(e?.code ?? "")
  if (TRANSIENT_ERRNO.test(code) || /^(57P0|53300|08)/.test(code)) return true
  if (code === "" && /timeout|timed out|Connection terminated/i.test(String(e?.message ?? ""))) return true
  if (e?.errors?.[0] !== undefined) return isTransientPostgresFailure(e.errors[0])
  return e?.cause !== undefined && e.cause !== cause ? isTransientPostgresFailure(e.cause) : false
}

/** Redis's reason in plain words, and whether waiting may fix it (LOADING: restarting with its data) */
export const redisReason = (cause: unknown): { readonly reason: string; readonly transient: boolean } => {
  const e = cause as { code?: string; message?: string } | undefined
  const code = String(e?.code ?? "")
  const message = String(e?.message ?? "")
  if (code === "ECONNREFUSED") return { reason: "connection refused (is Redis running and listening there?)", transient: true }
  if (code === "ENOTFOUND" || /getaddrinfo/i.test(message) && code !== "EAI_AGAIN") return { reason: "unknown host", transient: false }
  if (TRANSIENT_ERRNO.test(code) || /timeout|timed out/i.test(message)) return { reason: code === "ETIMEDOUT" || /time/i.test(message) ? "timed out" : code, transient: true }
  if (/^LOADING/.test(message)) return { reason: "Redis is loading its data", transient: true }
  if (/NOAUTH|WRONGPASS|invalid password/i.test(message)) return { reason: "authentication failed (check the password in REDIS_URL)", transient: false }
  return { reason: message.split("\n")[0] || "connection failed", transient: /Connection is closed/i.test(message) }
}
