/**
 * What runs: version, git commit and build time (decisions §10, revised). The compiled binary has
 * them baked in by scripts/build.ts (`--define`); run from source, the commit is asked of git once
 * at start and the build time is "source" (two builds of one version are told apart by the commit).
 */
import { spawnSync } from "node:child_process"
import { dirname } from "node:path"
import pkg from "../../package.json" with { type: "json" }

// replaced by string literals in the binary (scripts/build.ts); undeclared from source
declare const AGENT_AUTH_COMMIT: string
declare const AGENT_AUTH_BUILT_AT: string

export interface BuildInfo {
  readonly version: string
  readonly commit: string
  readonly builtAt: string
}

/** HEAD of the checkout this file lives in, or "unknown" (no git, not a checkout) */
export const sourceCommit = (): string => {
  try {
    const out = spawnSync("git", ["rev-parse", "HEAD"], { cwd: dirname(import.meta.path), encoding: "utf8", timeout: 2_000 })
    const commit = out.status === 0 ? out.stdout.trim() : ""
    return /^[0-9a-f]{40}$/.test(commit) ? commit : "unknown"
  } catch {
    return "unknown"
  }
}

let cached: BuildInfo | undefined

export const buildInfo = (): BuildInfo =>
  (cached ??= {
    version: pkg.version,
    commit: typeof AGENT_AUTH_COMMIT === "string" ? AGENT_AUTH_COMMIT : sourceCommit(),
    builtAt: typeof AGENT_AUTH_BUILT_AT === "string" ? AGENT_AUTH_BUILT_AT : "source"
  })

/** one line for `--version` and the start-up log */
export const versionLine = (info: BuildInfo = buildInfo()) => `agent-auth ${info.version} (commit ${info.commit}, built ${info.builtAt})`
