/**
 * Why a connection at start failed, in one line an operator can act on: refused, unknown host,
 * authentication failed, database does not exist, timed out. The URL is named by host, port and
 * database only (never its password).
 */
export class ConnectFailure extends Error {
  readonly _tag = "ConnectFailure"
}

const where = (url: string): string => {
  try {
    const u = new URL(url)
    return `${u.hostname}:${u.port || "5432"}${u.pathname.length > 1 ? u.pathname : ""}`
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
  return new ConnectFailure(`DATABASE_URL: cannot connect to ${where(url)}: ${postgresReason(cause)}`)
}
