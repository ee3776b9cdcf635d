/**
 * A tiny authoritative DNS server over UDP (node:dgram) for tests: answers TXT queries from a
 * table, NXDOMAIN for unknown names, SERVFAIL for names marked as failing.
 */
import { createSocket } from "node:dgram"

export interface TestDnsServer {
  readonly address: string
  /** TXT records per name (each record a string; long ones are split in 255-byte chunks) */
  readonly txt: Map<string, Array<string>>
  /** names answered with SERVFAIL */
  readonly failing: Set<string>
  readonly queries: Array<{ name: string; type: number }>
  readonly close: () => Promise<void>
}

const readName = (msg: Buffer, offset: number): { name: string; next: number } => {
  const labels: Array<string> = []
  let i = offset
  while (msg[i]! !== 0) {
    const len = msg[i]!
    labels.push(msg.subarray(i + 1, i + 1 + len).toString("latin1"))
    i += 1 + len
  }
  return { name: labels.join("."), next: i + 1 }
}

const txtRdata = (value: string): Buffer => {
  const bytes = Buffer.from(value, "utf8")
  const parts: Array<Buffer> = []
  for (let i = 0; i < bytes.length || i === 0; i += 255) {
    const chunk = bytes.subarray(i, i + 255)
    parts.push(Buffer.from([chunk.length]), chunk)
    if (bytes.length === 0) break
  }
  return Buffer.concat(parts)
}

export const startDnsServer = async (): Promise<TestDnsServer> => {
  const socket = createSocket("udp4")
  const txt = new Map<string, Array<string>>()
  const failing = new Set<string>()
  const queries: Array<{ name: string; type: number }> = []
  socket.on("message", (msg, rinfo) => {
    if (msg.length < 12) return
    const id = msg.readUInt16BE(0)
    const rd = msg[2]! & 0x01
    const { name, next } = readName(msg, 12)
    const type = msg.readUInt16BE(next)
    const question = msg.subarray(12, next + 4)
    queries.push({ name, type })
    const key = name.toLowerCase()
    const records = type === 16 ? txt.get(key) : undefined
    const rcode = failing.has(key) ? 2 : txt.has(key) ? 0 : 3
    const answers = rcode === 0 && records
      ? records.map((value) => {
        const rdata = txtRdata(value)
        const rr = Buffer.alloc(12)
        rr.writeUInt16BE(0xc00c, 0) // pointer to the question's name
        rr.writeUInt16BE(16, 2) // TXT
        rr.writeUInt16BE(1, 4) // IN
        rr.writeUInt32BE(60, 6)
        rr.writeUInt16BE(rdata.length, 10)
        return Buffer.concat([rr, rdata])
      })
      : []
    const header = Buffer.alloc(12)
    header.writeUInt16BE(id, 0)
    header[2] = 0x84 | rd // QR, AA, RD copied
    header[3] = 0x80 | rcode // RA
    header.writeUInt16BE(1, 4)
    header.writeUInt16BE(answers.length, 6)
    socket.send(Buffer.concat([header, question, ...answers]), rinfo.port, rinfo.address)
  })
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve))
  const { port } = socket.address()
  return {
    address: `127.0.0.1:${port}`,
    txt,
    failing,
    queries,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve()))
  }
}
