/**
 * An embedded data directory (pglite://<dir>) belongs to one process (decisions §10, revised): two
 * PGlite instances on one directory each see only their own writes, and the one that stops first
 * loses them. The first process takes an exclusive lock on `<dir>/agent-auth.lock` before anything
 * opens the directory, and writes its pid there; a second service or operator command fails with
 * DataDirectoryHeld naming that pid, having written nothing.
 *
 * The lock is flock(2) (through bun:ffi: Node's fs has no flock), so the kernel releases it when the
 * holder dies however it dies; a pid left in the file by a killed holder is just stale text. Where
 * libc cannot be loaded, a pid file with a liveness check of the recorded pid stands in.
 *
 * Readiness asks `check`: the directory must still be there (the lock file the same inode) and
 * writable, or the service would go on acknowledging writes it cannot keep.
 */
import { Context, Effect, Layer } from "effect"
import { accessSync, closeSync, constants, fstatSync, ftruncateSync, mkdirSync, openSync, readFileSync, statSync, unlinkSync, writeSync } from "node:fs"
import { join, resolve } from "node:path"
import { Config } from "../Config.ts"

export class DataDirectoryHeld extends Error {
  readonly _tag = "DataDirectoryHeld"
  constructor(readonly directory: string, readonly pid: number | undefined) {
    super(`data directory ${directory} is held by ${pid === undefined ? "another process" : `pid ${pid}`}; stop it, or use the API`)
  }
}

export interface DataDirectoryService {
  /** undefined while the directory is usable; otherwise why not (one short line) */
  readonly check: () => string | undefined
}

export class DataDirectory extends Context.Tag("agent-auth/DataDirectory")<DataDirectory, DataDirectoryService>() {}

export const LOCK_FILE = "agent-auth.lock"

const LOCK_EX = 2
const LOCK_NB = 4

type Flock = (fd: number) => "locked" | "held"

/** flock(fd, LOCK_EX | LOCK_NB) from libc, or undefined where libc cannot be loaded */
const loadFlock = (): Flock | null => {
  try {
    const { dlopen, FFIType, read } = require("bun:ffi") as typeof import("bun:ffi")
    for (const [name, errnoSymbol] of [["libc.so.6", "__errno_location"], ["libc.dylib", "__error"]] as const) {
      try {
        const libc = dlopen(name, {
          flock: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
          [errnoSymbol]: { args: [], returns: FFIType.ptr }
        })
        const symbols = libc.symbols as Record<string, (...args: Array<unknown>) => any>
        return (fd) => {
          if (symbols.flock!(fd, LOCK_EX | LOCK_NB) === 0) return "locked"
          const errno = read.i32(symbols[errnoSymbol]!(), 0)
          // EWOULDBLOCK is 11 on Linux, 35 on macOS; anything else is not "held" and is thrown
          if (errno === 11 || errno === 35) return "held"
          throw new Error(`flock failed (errno ${errno})`)
        }
      } catch {
        // try the next name
      }
    }
  } catch {
    // not under Bun
  }
  return null
}

const readPid = (path: string): number | undefined => {
  try {
    const pid = Number(readFileSync(path, "utf8").trim())
    return Number.isInteger(pid) && pid > 0 ? pid : undefined
  } catch {
    return undefined
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (e) {
    return (e as { code?: string }).code === "EPERM"
  }
}

export interface Held {
  readonly path: string
  readonly ino: number
  readonly release: () => void
}

/**
 * Takes the directory's lock or throws DataDirectoryHeld. Nothing in the directory is written
 * unless the lock is taken (the lock file is opened without truncation, and an existing one is
 * left as it is). `flock` null: the pid-file stand-in (tests pass it to exercise that path).
 */
export const lockDataDirectory = (directory: string, flock: Flock | null = loadFlock()): Held => {
  const dir = resolve(directory)
  const path = join(dir, LOCK_FILE)
  mkdirSync(dir, { recursive: true })
  if (flock === null) return pidFileLock(dir, path)
  const fd = openSync(path, constants.O_RDWR | constants.O_CREAT, 0o600)
  let outcome: "locked" | "held"
  try {
    outcome = flock(fd)
  } catch (e) {
    closeSync(fd)
    throw e
  }
  if (outcome === "held") {
    closeSync(fd)
    throw new DataDirectoryHeld(dir, readPid(path))
  }
  ftruncateSync(fd, 0)
  writeSync(fd, `${process.pid}\n`, 0)
  let released = false
  return {
    path,
    ino: fstatSync(fd).ino,
    release: () => {
      if (released) return
      released = true
      // the file stays (unlinking it would let a late opener lock a file nobody else sees); its pid goes
      try {
        ftruncateSync(fd, 0)
      } catch {
        // the directory may be gone
      }
      closeSync(fd)
    }
  }
}

/** The stand-in without flock: O_EXCL creation; a file naming a dead pid (or none) is stale. */
const pidFileLock = (dir: string, path: string): Held => {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o600)
      writeSync(fd, `${process.pid}\n`, 0)
      const ino = fstatSync(fd).ino
      closeSync(fd)
      return { path, ino, release: () => unlinkSync(path) }
    } catch (e) {
      if ((e as { code?: string }).code !== "EEXIST") throw e
      const pid = readPid(path)
      // our own pid in the file is stale: a restarted container often gets the pid its last run had
      if (pid !== undefined && pid !== process.pid && alive(pid)) throw new DataDirectoryHeld(dir, pid)
      unlinkSync(path)
    }
  }
  throw new DataDirectoryHeld(dir, readPid(path))
}

/** Whether the locked directory is still there and writable (a few syscalls: cheap enough per probe). */
export const checkHeld = (held: Pick<Held, "path" | "ino">) => (): string | undefined => {
  try {
    if (statSync(held.path).ino !== held.ino) return "data directory replaced"
    accessSync(join(held.path, ".."), constants.W_OK)
    return undefined
  } catch (e) {
    const code = (e as { code?: string }).code
    return code === "ENOENT" ? "data directory removed" : `data directory not writable (${code ?? "error"})`
  }
}

const noDirectory: DataDirectoryService = { check: () => undefined }

/** The lock for a pglite://<dir> configuration, held until the layer's scope closes; nothing otherwise. */
export const DataDirectoryLive = Layer.scoped(
  DataDirectory,
  Effect.gen(function*() {
    const config = yield* Config
    if (!config.dataDir) return noDirectory
    const held = yield* Effect.acquireRelease(
      Effect.try({ try: () => lockDataDirectory(config.dataDir!), catch: (e) => e }),
      (h) => Effect.sync(h.release)
    )
    return { check: checkHeld(held) }
  })
)
