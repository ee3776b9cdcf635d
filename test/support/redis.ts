/** A private redis-server on a free port, so a test can stop and restart it without touching the shared one. */
import { spawn, type ChildProcess } from "node:child_process"
import { existsSync } from "node:fs"
import { freePort } from "./net.ts"

export const REDIS_SERVER = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"].find(existsSync)

export interface PrivateRedis {
  readonly url: string
  readonly stop: () => Promise<void>
  readonly start: () => Promise<void>
}

export const startPrivateRedis = async (): Promise<PrivateRedis> => {
  const port = await freePort()
  let child: ChildProcess | undefined
  const start = async () => {
    // a peer server keeps the machine's real time: a suite run under libfaketime (the date a year
    // ahead) does not hand it on, and redis-server cannot start under it
    const { LD_PRELOAD: _preload, FAKETIME: _faketime, ...env } = process.env
    child = spawn(REDIS_SERVER!, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdio: "ignore",
      env
    })
    // up to 10 s: a loaded machine can take seconds to start it
    for (let i = 0; i < 500; i++) {
      const up = await new Promise<boolean>((resolve) => {
        const socket = require("node:net").connect(port, "127.0.0.1")
        socket.once("connect", () => (socket.end(), resolve(true)))
        socket.once("error", () => resolve(false))
      })
      if (up) return
      await Bun.sleep(20)
    }
    throw new Error("redis-server did not start")
  }
  const stop = async () => {
    if (child === undefined) return
    const c = child
    child = undefined
    await new Promise<void>((resolve) => {
      c.once("exit", () => resolve())
      c.kill("SIGKILL")
    })
  }
  await start()
  return { url: `redis://127.0.0.1:${port}`, start, stop }
}
