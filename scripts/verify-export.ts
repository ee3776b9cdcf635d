/**
 * The auditor's export verifier in a checkout: `bun scripts/verify-export.ts <export file> <jwks> [proof.json] [--headers <file>]`.
 * The verifier itself is src/compliance/ExportVerifier.ts; the binary runs it as `agent-auth verify-export`.
 */
import { runVerifyExport } from "../src/compliance/verifyExportCommand.ts"

export { verifyExport, type Verdict } from "../src/compliance/ExportVerifier.ts"

if (import.meta.main) process.exit(await runVerifyExport(process.argv.slice(2)))
