/**
 * Builds the single executable `dist/agent-auth` with `bun build --compile`: the service, its
 * migrations (imported as text) and PGlite's wasm/data (imported as files) in one file that runs
 * on a machine with neither Node nor Bun; and the on-device kit as JavaScript with type
 * declarations (dist/offline/, see buildKit.ts).
 */
import { $ } from "bun"
import { mkdirSync } from "node:fs"
import { buildKit } from "./buildKit.ts"
import { sourceCommit } from "../src/platform/BuildInfo.ts"

mkdirSync("dist", { recursive: true })
const entrypoints = ["src/main.ts"]
// Worker entry points must be named so the compiler embeds them; they land relative to the entry
// points' common folder (src/), which is where Verifier.ts's and CedarPool.ts's worker URLs look in the binary.
for (const extra of ["src/offline-sync/verifyWorker.ts", "src/policies/cedarWorker.ts"]) {
  if (await Bun.file(extra).exists()) entrypoints.push(extra)
}
const started = performance.now()
// what `--version` and /health/ready name (src/platform/BuildInfo.ts): the commit built and when
const commit = sourceCommit()
const builtAt = new Date().toISOString()
const defines = ["--define", `AGENT_AUTH_COMMIT=${JSON.stringify(commit)}`, "--define", `AGENT_AUTH_BUILT_AT=${JSON.stringify(builtAt)}`]
await $`${process.execPath} build --compile --minify-syntax --minify-whitespace --sourcemap=none --target=bun ${defines} ${entrypoints} --outfile dist/agent-auth`
const size = Bun.file("dist/agent-auth").size
console.log(`dist/agent-auth: ${(size / 1024 / 1024).toFixed(1)} MB in ${((performance.now() - started) / 1000).toFixed(1)} s (commit ${commit}, built ${builtAt})`)
await buildKit()
console.log("dist/offline and dist/offline-kit: the on-device kit, as an entry of this package and as a package of its own")
