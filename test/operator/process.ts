/**
 * The real command line as a child process (`bun src/main.ts ...`): its stdout lines as they come,
 * the port it listens on (from its "listening" line), and its exit.
 */
import type { Subprocess } from "bun"

export interface ServiceProcess {
  readonly proc: Subprocess<"ignore", "pipe", "pipe">
  readonly pid: number
  /** stdout lines so far, parsed when JSON */
  readonly lines: Array<any>
  stderr: string
  /** resolves with the line that matches, or rejects after `timeoutMs` (or when the process ends first) */
  readonly waitFor: (match: (line: any) => boolean, timeoutMs: number) => Promise<any>
  /** the base URL once "listening" was logged */
  readonly listening: (timeoutMs?: number) => Promise<string>
  readonly exited: Promise<number>
  readonly stop: (signal?: NodeJS.Signals) => Promise<number>
}

export const spawnCli = (args: ReadonlyArray<string>, env: Record<string, string>): ServiceProcess => {
  const proc = Bun.spawn([process.execPath, "src/main.ts", ...args], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe"
  })
  const lines: Array<any> = []
  const waiters = new Set<() => void>()
  let ended = false
  const self: ServiceProcess = {
    proc,
    pid: proc.pid,
    lines,
    stderr: "",
    waitFor: (match, timeoutMs) =>
      new Promise((resolve, reject) => {
        const check = () => {
          const found = lines.find(match)
          if (found !== undefined) return done(() => resolve(found))
          if (ended) return done(() => reject(new Error(`process ended first; stderr: ${self.stderr}`)))
        }
        const timer = setTimeout(() => done(() => reject(new Error(`timed out after ${timeoutMs} ms; stderr: ${self.stderr}`))), timeoutMs)
        const done = (f: () => void) => {
          clearTimeout(timer)
          waiters.delete(check)
          f()
        }
        waiters.add(check)
        check()
      }),
    listening: async (timeoutMs = 60_000) => {
      const line = await self.waitFor((l) => l?.message === "listening", timeoutMs)
      return String(line.url).replace("0.0.0.0", "127.0.0.1")
    },
    exited: proc.exited,
    stop: async (signal = "SIGTERM") => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal)
      return proc.exited
    }
  }
  void (async () => {
    let buffer = ""
    for await (const chunk of proc.stdout) {
      buffer += new TextDecoder().decode(chunk)
      let nl: number
      while ((nl = buffer.indexOf("\n")) !== -1) {
        const text = buffer.slice(0, nl)
        buffer = buffer.slice(nl + 1)
        try {
          lines.push(JSON.parse(text))
        } catch {
          lines.push({ text })
        }
      }
      for (const w of [...waiters]) w()
    }
  })()
  void new Response(proc.stderr).text().then((text) => (self.stderr = text))
  void proc.exited.then(async () => {
    await Bun.sleep(20) // the last stdout chunk
    ended = true
    for (const w of [...waiters]) w()
  })
  return self
}

/** a one-shot command: its output and exit code */
export const runCli = async (args: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  const child = Bun.spawn([process.execPath, "src/main.ts", ...args], {
    env: { PATH: process.env.PATH ?? "", ...env },
    stdout: "pipe",
    stderr: "pipe"
  })
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited])
  return { stdout, stderr, code }
}
