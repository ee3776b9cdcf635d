#!/usr/bin/env node
/** The entry of the export verifier's own package (`agent-auth-verify-export`, plain Node 18+; decisions §24). */
import { webcrypto } from "node:crypto"
import { runVerifyExport } from "./verifyExportCommand.ts"

// Node 18 has Web Crypto only as node:crypto's `webcrypto` (the global came in Node 19); the signature
// check (jose) reads the global when it runs, so it is set before any check starts
if ((globalThis as { crypto?: unknown }).crypto === undefined) {
  Object.defineProperty(globalThis, "crypto", { value: webcrypto, configurable: true })
}

process.exit(await runVerifyExport(process.argv.slice(2)))
