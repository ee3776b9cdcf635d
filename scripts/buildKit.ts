/**
 * Builds the on-device kit (src/offline/) as a package entry (issue 17 item 5):
 * dist/offline/index.js, one ES module with its two dependencies (@noble/hashes, @noble/curves)
 * bundled in, for browsers, React Native and Node 20 alike (the kit uses no Node API), and
 * dist/offline/index.d.ts (+ canonical.d.ts) from tsc; and the webhook verifier likewise
 * (dist/webhooks/verify.js + .d.ts). package.json `exports` points at them;
 * Bun, through the "bun" condition, keeps importing the sources.
 */
import { $ } from "bun"
import { readFileSync, rmSync, writeFileSync } from "node:fs"

export const buildKit = async (outdir = "dist/offline"): Promise<void> => {
  rmSync(outdir, { recursive: true, force: true })
  await $`${process.execPath} build src/offline/index.ts --target=browser --format=esm --outfile ${outdir}/index.js`.quiet()
  await $`node_modules/.bin/tsc --ignoreConfig --declaration --emitDeclarationOnly --allowImportingTsExtensions --strict --skipLibCheck --target esnext --module esnext --moduleResolution bundler --lib esnext,dom --types ${""} --rootDir src/offline --outDir ${outdir} src/offline/index.ts`
  // the declarations name their sibling as the published file is named
  const types = `${outdir}/index.d.ts`
  writeFileSync(types, readFileSync(types, "utf8").replaceAll(`from "./canonical.ts"`, `from "./canonical.js"`))
  const js = readFileSync(`${outdir}/index.js`, "utf8")
  if (/\bfrom\s*["']node:|require\(["']node:/.test(js)) throw new Error("the kit must not use Node APIs")
  // the receivers' verifier (agent-auth-service/webhooks/verify): Web Crypto only, no dependency
  const verifyDir = `${outdir}/../webhooks`
  rmSync(verifyDir, { recursive: true, force: true })
  await $`${process.execPath} build src/webhooks/verify.ts --target=browser --format=esm --outfile ${verifyDir}/verify.js`.quiet()
  await $`node_modules/.bin/tsc --ignoreConfig --declaration --emitDeclarationOnly --strict --skipLibCheck --target esnext --module esnext --moduleResolution bundler --lib esnext,dom --types ${""} --rootDir src/webhooks --outDir ${verifyDir} src/webhooks/verify.ts`
}

if (import.meta.main) {
  const started = performance.now()
  await buildKit()
  console.log(`dist/offline: index.js + index.d.ts in ${((performance.now() - started) / 1000).toFixed(1)} s`)
}
