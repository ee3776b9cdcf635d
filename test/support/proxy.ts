/** A TCP proxy a test can cut and restore, to take a dependency away without stopping the shared server. */
import { createServer, connect, type Server, type Socket } from "node:net"

export interface CuttableProxy {
  readonly port: number
  /** drops every connection and refuses new ones */
  readonly cut: () => Promise<void>
  readonly restore: () => Promise<void>
  readonly close: () => Promise<void>
}

/** `listenPort`: listen there rather than on a free port (a service told the address before the proxy starts) */
export const startProxy = async (targetHost: string, targetPort: number, listenPort = 0): Promise<CuttableProxy> => {
  const sockets = new Set<Socket>()
  let server: Server | undefined
  let port = listenPort
  const listen = () =>
    new Promise<void>((resolve) => {
      server = createServer((client) => {
        const upstream = connect(targetPort, targetHost)
        sockets.add(client)
        sockets.add(upstream)
        client.pipe(upstream)
        upstream.pipe(client)
        const drop = () => {
          client.destroy()
          upstream.destroy()
          sockets.delete(client)
          sockets.delete(upstream)
        }
        client.on("error", drop).on("close", drop)
        upstream.on("error", drop).on("close", drop)
      })
      server.listen(port, "127.0.0.1", () => {
        port = (server!.address() as { port: number }).port
        resolve()
      })
    })
  const cut = async () => {
    for (const s of sockets) s.destroy()
    sockets.clear()
    await new Promise<void>((resolve) => server ? server.close(() => resolve()) : resolve())
    server = undefined
  }
  await listen()
  return {
    get port() {
      return port
    },
    cut,
    restore: listen,
    close: cut
  }
}
