/** A local receiver that records what it got and answers what the test says. */
export interface Received {
  readonly body: string
  readonly headers: Headers
}

export const startReceiver = (answer: (n: number, body: string) => number = () => 200) => {
  const received: Array<Received> = []
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const body = await request.text()
      received.push({ body, headers: request.headers })
      return new Response("ok", { status: answer(received.length, body) })
    }
  })
  return { url: `http://127.0.0.1:${server.port}/hook`, received, stop: () => server.stop(true) }
}
