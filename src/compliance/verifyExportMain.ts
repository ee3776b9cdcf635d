#!/usr/bin/env node
/** The entry of the export verifier's own package (`agent-auth-verify-export`, plain Node 18+; decisions §24). */
import { runVerifyExport } from "./verifyExportCommand.ts"

process.exit(await runVerifyExport(process.argv.slice(2)))
