/** A local receiver that records what it got (raw bytes and headers) and answers what the test says. */
export interface Received {
  readonly raw: Uint8Array
  readonly body: string
  readonly headers: Headers
}

export const startReceiver = (answer: (n: number, body: string) => number | Response = () => 200) => {
  const received: Array<Received> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const raw = new Uint8Array(await request.arrayBuffer())
      const body = new TextDecoder().decode(raw)
      received.push({ raw, body, headers: request.headers })
      const reply = answer(received.length, body)
      return typeof reply === "number" ? new Response("ok", { status: reply }) : reply
    }
  })
  return { url: `http://127.0.0.1:${server.port}/hook`, received, stop: () => server.stop(true) }
}
