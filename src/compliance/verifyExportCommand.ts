/**
 * `agent-auth verify-export` (decisions §15, §24): the verifier's command line, the same in the
 * binary, in its own package (`npx agent-auth-verify-export`, plain Node 18+) and in a checkout
 * (`bun scripts/verify-export.ts`). Prints VALID or INVALID with each problem; answers the exit code:
 * 0 when everything holds, 1 when something does not, 2 for a usage error.
 */
import { readFileSync } from "node:fs"
import { verifyExport } from "./ExportVerifier.ts"

export const VERIFY_EXPORT_USAGE = "verify-export <export file> <jwks.json | https://host/.well-known/jwks.json> [proof.json] [--headers <file>]"

/** `curl -D` output (or any `Name: value` lines) as headers */
const readHeaderFile = (text: string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const line of text.split(/\r?\n/)) {
    const i = line.indexOf(":")
    if (i > 0 && !line.startsWith("HTTP/")) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  return out
}

export const runVerifyExport = async (argv: ReadonlyArray<string>, print: (line: string) => void = console.log): Promise<number> => {
  const args = [...argv]
  const at = args.indexOf("--headers")
  const headerFile = at >= 0 ? args.splice(at, 2)[1] : undefined
  const [file, keys, proofFile] = args
  if (file === undefined || keys === undefined || (at >= 0 && headerFile === undefined)) {
    print(`usage: ${VERIFY_EXPORT_USAGE}`)
    return 2
  }
  const jwks = /^https?:\/\//.test(keys) ? await (await fetch(keys)).json() : JSON.parse(readFileSync(keys, "utf8"))
  const verdict = await verifyExport(readFileSync(file), jwks, {
    proof: proofFile === undefined ? undefined : JSON.parse(readFileSync(proofFile, "utf8")),
    headers: headerFile === undefined ? undefined : readHeaderFile(readFileSync(headerFile, "utf8"))
  })
  print(`${verdict.ok ? "VALID" : "INVALID"}: ${verdict.kind}, ${verdict.rows} rows`)
  for (const e of verdict.errors) print(`  - ${e}`)
  return verdict.ok ? 0 : 1
}
