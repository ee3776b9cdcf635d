/**
 * HTTP/1.1 by hand over a socket, for framings fetch does not let a test choose (a chunked body
 * without a declared length). Answers the status, the headers and the body text.
 */
import { connect } from "node:net"

export interface RawResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

const decodeChunked = (raw: string): string => {
  let out = ""
  let at = 0
  for (;;) {
    const lineEnd = raw.indexOf("\r\n", at)
    if (lineEnd === -1) return out
    const size = parseInt(raw.slice(at, lineEnd), 16)
    if (!(size > 0)) return out
    out += raw.slice(lineEnd + 2, lineEnd + 2 + size)
    at = lineEnd + 2 + size + 2
  }
}

/**
 * A chunk whose header declares more bytes than are sent: the body stays open after `data` and the
 * request waits for the answer. A server that refuses mid-chunk has then read all that was sent and
 * closes cleanly, so no reset can race its answer (as one does while the client is still writing).
 */
export interface OpenChunk {
  readonly declaredBytes: number
  readonly data: string
}

const isOpenChunk = (chunk: string | Uint8Array | OpenChunk): chunk is OpenChunk =>
  typeof chunk === "object" && "declaredBytes" in chunk

/** Sends `chunks` as a chunked body (each one chunk); the connection is closed after the answer. */
export const chunkedRequest = (
  baseUrl: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  chunks: Iterable<string | Uint8Array | OpenChunk>
): Promise<RawResponse> =>
  new Promise((resolve, reject) => {
    const url = new URL(baseUrl)
    const socket = connect(Number(url.port), url.hostname)
    const received: Array<Buffer> = []
    let settled = false
    const finish = () => {
      if (settled) return
      settled = true
      const text = Buffer.concat(received).toString("utf8")
      const split = text.indexOf("\r\n\r\n")
      if (split === -1) return reject(new Error(`no answer: ${JSON.stringify(text.slice(0, 200))}`))
      const [statusLine, ...lines] = text.slice(0, split).split("\r\n")
      const head: Record<string, string> = {}
      for (const line of lines) {
        const colon = line.indexOf(":")
        head[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
      }
      const rest = text.slice(split + 4)
      const body = head["transfer-encoding"]?.includes("chunked") ? decodeChunked(rest) : rest.slice(0, Number(head["content-length"] ?? rest.length))
      resolve({ status: Number(statusLine!.split(" ")[1]), headers: head, body })
      socket.destroy()
    }
    socket.on("data", (d) => {
      received.push(Buffer.from(d))
      // the answer is complete once its declared length (or the chunked terminator) has arrived
      const text = Buffer.concat(received).toString("utf8")
      const split = text.indexOf("\r\n\r\n")
      if (split === -1) return
      const headText = text.slice(0, split).toLowerCase()
      const length = /content-length:\s*(\d+)/.exec(headText)
      if (length && Buffer.byteLength(text.slice(split + 4)) >= Number(length[1])) finish()
      else if (headText.includes("transfer-encoding: chunked") && text.endsWith("0\r\n\r\n")) finish()
    })
    socket.on("end", finish)
    socket.on("close", finish)
    socket.on("error", (e) => {
      // the server may close while the rest of an over-limit body is still being written: its answer
      // may still be on the way in
      setTimeout(() => {
        if (received.length > 0) finish()
        else if (!settled) {
          settled = true
          reject(e)
        }
      }, 100)
    })
    socket.on("connect", () => void upload().catch(() => {
      // the server closed mid-upload (it answered early): the answer, if any, is handled by "close"
    }))
    const upload = async () => {
      const lines = [`${method} ${path} HTTP/1.1`, `Host: ${url.host}`, "Transfer-Encoding: chunked", "Connection: close"]
      for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`)
      socket.write(lines.join("\r\n") + "\r\n\r\n")
      for (const chunk of chunks) {
        if (settled || socket.destroyed || received.length > 0) return
        if (isOpenChunk(chunk)) {
          socket.write(`${chunk.declaredBytes.toString(16)}\r\n`)
          socket.write(chunk.data)
          return
        }
        const bytes = typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk)
        const ok = socket.write(`${bytes.length.toString(16)}\r\n`) && socket.write(bytes) && socket.write("\r\n")
        if (!ok) await new Promise((r) => { socket.once("drain", r); socket.once("close", r) })
      }
      if (!settled && !socket.destroyed && received.length === 0) socket.write("0\r\n\r\n")
    }
  })
