/**
 * Builds the on-device kit (src/offline/) twice over: as a package of its own, dist/offline-kit/
 * (`@agent-auth/offline-kit`, decisions §24: its package.json, no runtime dependency, README), and as
 * an entry of this package (issue 17 item 5):
 * dist/offline/index.js, one ES module with its two dependencies (@noble/hashes, @noble/curves)
 * bundled in, for browsers, React Native and Node 20 alike (the kit uses no Node API), and
 * dist/offline/index.d.ts (+ canonical.d.ts) from tsc; and the webhook verifier likewise
 * (dist/webhooks/verify.js + .d.ts). package.json `exports` points at them;
 * Bun, through the "bun" condition, keeps importing the sources.
 */
import { $ } from "bun"
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"

/** the kit's declarations name their siblings as the published files are named (.js, not .ts) */
const publishedImports = (dir: string) => {
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".d.ts"))) {
    const path = join(dir, file)
    writeFileSync(path, readFileSync(path, "utf8").replace(/from "(\.\/[\w-]+)\.ts"/g, `from "$1.js"`))
  }
}

const kitTypes = (outdir: string) =>
  $`node_modules/.bin/tsc --ignoreConfig --declaration --emitDeclarationOnly --allowImportingTsExtensions --strict --skipLibCheck --target esnext --module esnext --moduleResolution bundler --lib esnext,dom --types ${""} --rootDir src/offline --outDir ${outdir} src/offline/index.ts`

/** a package of its own: its package.json (this package's version, Node 18+) and its README */
const writePackage = (outdir: string, manifest: Record<string, unknown>, readme: string) => {
  const { version } = JSON.parse(readFileSync("package.json", "utf8")) as { version: string }
  const { name, description, ...rest } = manifest
  writeFileSync(join(outdir, "package.json"), JSON.stringify({ name, version, description, type: "module", ...rest, engines: { node: ">=18" } }, null, 2) + "\n")
  copyFileSync(readme, join(outdir, "README.md"))
}

/**
 * dist/offline-kit: what `npm pack dist/offline-kit` makes a tarball of. The kit's two dependencies
 * (@noble/hashes, @noble/curves) are bundled in, so it installs alone.
 */
export const buildKitPackage = async (outdir = "dist/offline-kit"): Promise<void> => {
  rmSync(outdir, { recursive: true, force: true })
  await $`${process.execPath} build src/offline/index.ts --target=browser --format=esm --outfile ${outdir}/index.js`.quiet()
  await kitTypes(outdir)
  publishedImports(outdir)
  writePackage(outdir, {
    name: "@agent-auth/offline-kit",
    description: "The on-device kit of agent-auth-service: act on a consent bundle offline and hand back a signed audit trail",
    main: "./index.js",
    types: "./index.d.ts",
    exports: { ".": { types: "./index.d.ts", default: "./index.js" } },
    files: ["*.js", "*.d.ts", "README.md"],
    sideEffects: false
  }, "src/offline/README.md")
}

/**
 * dist/export-verifier: the auditor's verifier as a package of its own (decisions §24), one bundled
 * Node script (jose and csv-parse inside) behind the `agent-auth-verify-export` command.
 */
export const buildVerifierPackage = async (outdir = "dist/export-verifier"): Promise<void> => {
  rmSync(outdir, { recursive: true, force: true })
  await $`${process.execPath} build src/compliance/verifyExportMain.ts --target=node --format=esm --outfile ${outdir}/cli.js`.quiet()
  const cli = join(outdir, "cli.js")
  const code = readFileSync(cli, "utf8")
  if (!code.startsWith("#!")) writeFileSync(cli, `#!/usr/bin/env node\n${code}`)
  writePackage(outdir, {
    name: "@agent-auth/export-verifier",
    description: "Checks an agent-auth-service compliance export against its proof and the service's public JWKS",
    bin: { "agent-auth-verify-export": "./cli.js" },
    files: ["cli.js", "README.md"]
  }, "src/compliance/VERIFIER.md")
}

export const buildKit = async (outdir = "dist/offline"): Promise<void> => {
  rmSync(outdir, { recursive: true, force: true })
  await $`${process.execPath} build src/offline/index.ts --target=browser --format=esm --outfile ${outdir}/index.js`.quiet()
  await kitTypes(outdir)
  publishedImports(outdir)
  const js = readFileSync(`${outdir}/index.js`, "utf8")
  if (/\bfrom\s*["']node:|require\(["']node:/.test(js)) throw new Error("the kit must not use Node APIs")
  await buildKitPackage(join(outdir, "..", "offline-kit"))
  await buildVerifierPackage(join(outdir, "..", "export-verifier"))
  // the receivers' verifier (agent-auth-service/webhooks/verify): Web Crypto only, no dependency
  const verifyDir = `${outdir}/../webhooks`
  rmSync(verifyDir, { recursive: true, force: true })
  await $`${process.execPath} build src/webhooks/verify.ts --target=browser --format=esm --outfile ${verifyDir}/verify.js`.quiet()
  await $`node_modules/.bin/tsc --ignoreConfig --declaration --emitDeclarationOnly --strict --skipLibCheck --target esnext --module esnext --moduleResolution bundler --lib esnext,dom --types ${""} --rootDir src/webhooks --outDir ${verifyDir} src/webhooks/verify.ts`
}

if (import.meta.main) {
  const started = performance.now()
  await buildKit()
  console.log(`dist/offline and dist/offline-kit: index.js + declarations in ${((performance.now() - started) / 1000).toFixed(1)} s`)
}
