#!/usr/bin/env bun
/**
 * agent-auth: the service's command line and the entry of the single binary.
 *   serve | migrate | dev | developers list|show|create|set-plan | keys generate | vault rekey | verify-export | --version | --help
 * Every command answers `--help` with its usage instead of running.
 * Exit codes: 0 done, 1 a configuration error (or a held data directory), 75 (EX_TEMPFAIL) PostgreSQL or
 * Redis still unreachable after STARTUP_TIMEOUT_SECONDS: the systemd unit restarts on 75, not on 1.
 */
import { Cause, Effect, Layer, Runtime } from "effect"
import pkg from "../package.json" with { type: "json" }
import { ConfigError, loadConfig, type AppConfig, VARIABLES } from "./Config.ts"
import { Config } from "./Config.ts"
import { buildInfo, versionLine } from "./platform/BuildInfo.ts"
import { ConnectFailure } from "./platform/ConnectErrors.ts"
import { DatabaseLive } from "./platform/Database.ts"
import { DataDirectoryHeld, DataDirectoryLive } from "./platform/DataDirectory.ts"
import { generateRsaPrivateKeyPem } from "./platform/Keys.ts"
import { makeLog } from "./platform/Log.ts"
import { runMigrations } from "./platform/Migrate.ts"
import { startupTargets, StartupTimeout, waitForDependencies } from "./platform/Startup.ts"
import { startServer } from "./Server.ts"
import { operatorCommands } from "./operator.ts"
import { runVerifyExport, VERIFY_EXPORT_USAGE } from "./compliance/verifyExportCommand.ts"

/** every command: its usage and what it does (the source of --help and of each command's --help) */
const COMMANDS: ReadonlyArray<{ readonly name: string; readonly usage: string; readonly does: string; readonly env?: "all" | "database" }> = [
  { name: "serve", usage: "serve", does: "start the service (applies pending migrations unless MIGRATE_ON_START=false)", env: "all" },
  { name: "migrate", usage: "migrate", does: "apply pending migrations and exit (needs only DATABASE_URL)", env: "database" },
  { name: "dev", usage: "dev", does: "embedded mode: PGlite under ./.data, in-memory counters, generated keys", env: "all" },
  { name: "developers list", usage: "developers list [--limit N]", does: "the newest developers (100 by default, at most 1000)", env: "database" },
  { name: "developers show", usage: "developers show <developerId|email>", does: "one developer: plan, mode, settings, agent count", env: "database" },
  { name: "developers create", usage: "developers create --name <name> --email <email> [--plan free|pro|enterprise] [--mode live|sandbox]", does: "create a developer and print its API key, once (for SIGNUP_ENABLED=false)", env: "database" },
  { name: "developers set-plan", usage: "developers set-plan <developerId> <plan>", does: "change a developer's plan (any plan in the plans table; also `billing set-plan`)", env: "database" },
  { name: "billing set-plan", usage: "billing set-plan <developerId> <plan>", does: "the same as developers set-plan", env: "database" },
  { name: "billing close-period", usage: "billing close-period [--period YYYY-MM]", does: "invoice a month that has ended (default: last month); idempotent", env: "database" },
  { name: "billing mark-paid", usage: "billing mark-paid <invoiceId>", does: "mark an open invoice paid", env: "database" },
  { name: "keys generate", usage: "keys generate", does: "print a new RSA private key (PEM) for RSA_PRIVATE_KEY" },
  { name: "vault rekey", usage: "vault rekey", does: "re-encrypt vault credentials, webhook secrets and SSO client secrets under the active key", env: "database" },
  { name: "verify-export", usage: VERIFY_EXPORT_USAGE, does: "check a compliance export against its proof and the service's public JWKS (no database; exit 0 valid, 1 not)" }
]

const environmentHelp = (only?: ReadonlyArray<string>) => {
  const vars = VARIABLES.filter((v) => only === undefined || only.includes(v.name))
  const width = Math.max(...vars.map((v) => v.name.length))
  return vars.map((v) => `  ${v.name.padEnd(width)}  ${v.default}${v.meaning ? `: ${v.meaning}` : ""}`).join("\n")
}

const HELP = `agent-auth ${pkg.version}: authorization service for software agents

Usage:
${COMMANDS.map((c) => `  agent-auth ${c.usage}\n      ${c.does}`).join("\n")}
  agent-auth --version | --help
  agent-auth <command> --help           that command's usage and the variables it reads

Environment (default, then meaning; see README.md):
${environmentHelp()}`

const commandHelp = (c: (typeof COMMANDS)[number]) =>
  `Usage: agent-auth ${c.usage}\n\n${c.does}\n` +
  (c.env === "all" ? `\nEnvironment (default, then meaning):\n${environmentHelp()}\n` : "") +
  (c.env === "database" ? `\nEnvironment:\n${environmentHelp(["DATABASE_URL", "LOG_LEVEL"])}\n` : "")

const EX_TEMPFAIL = 75

const fail = (message: string, code = 1): never => {
  process.stderr.write(`agent-auth: ${message}\n`)
  process.exit(code)
}

/** the error a failed start or command ended with (an Effect run rejects with a FiberFailure) */
const rootError = (e: unknown): unknown => Runtime.isFiberFailure(e) ? Cause.squash(e[Runtime.FiberFailureCauseId]) : e
const firstLine = (e: unknown) => e instanceof Error ? e.message.split("\n")[0]! : String(e)

/** exit 1 for what waiting cannot fix, 75 for a dependency that may come back; a held directory says so plainly */
const failStart = (prefix: string, e: unknown): never => {
  const error = rootError(e)
  if (error instanceof DataDirectoryHeld) return fail(error.message)
  const transient = error instanceof StartupTimeout || (error instanceof ConnectFailure && error.transient)
  return fail(`${prefix}${firstLine(error)}`, transient ? EX_TEMPFAIL : 1)
}

const config = (env: Record<string, string | undefined>): AppConfig => {
  try {
    return loadConfig(env)
  } catch (e) {
    if (e instanceof ConfigError) return fail(`configuration error: ${e.message}`)
    throw e
  }
}

/** Commands that only touch the database need neither Redis nor the signing key. */
const databaseOnly = (env: Record<string, string | undefined>) => ({
  ...env,
  REDIS_URL: env.REDIS_URL || "memory://",
  AUTO_GENERATE_KEYS: env.RSA_PRIVATE_KEY ? env.AUTO_GENERATE_KEYS : "true",
  NODE_ENV: env.NODE_ENV === "production" && !env.RSA_PRIVATE_KEY ? "" : env.NODE_ENV
})

/** what `npm run dev` tells a newcomer once it listens: where it is, where the docs are, how to begin */
const devBanner = (base: string) =>
  [
    "",
    `  agent-auth-service ${pkg.version} (development: embedded database under ./.data)`,
    `  API   ${base}`,
    `  Docs  ${base}/docs`,
    "  Sign up for an API key:",
    `    curl -sS -X POST ${base}/v1/signup -H 'Content-Type: application/json' -d '{"name":"My company"}'`,
    "  Then send it as: Authorization: Bearer <apiKey>   (the README's quickstart goes on from there)",
    ""
  ].join("\n") + "\n"

const serve = async (cfg: AppConfig, options: { readonly banner?: boolean } = {}) => {
  const log = makeLog(cfg.logLevel)
  let server
  try {
    await Effect.runPromise(waitForDependencies(startupTargets(cfg), cfg.startupTimeoutSeconds, log))
    server = await startServer(cfg)
  } catch (e) {
    return failStart("could not start: ", e)
  }
  const { version, commit, builtAt } = buildInfo()
  log.write("info", "listening", { url: `http://${cfg.host}:${server.port}`, version, commit, builtAt })
  if (options.banner === true) process.stdout.write(devBanner(cfg.publicBaseUrl))
  let closing = false
  const shutdown = async (signal: string) => {
    if (closing) return
    closing = true
    log.write("info", "shutting down", { signal })
    await server.stop()
    process.exit(0)
  }
  process.on("SIGTERM", () => void shutdown("SIGTERM"))
  process.on("SIGINT", () => void shutdown("SIGINT"))
}

/** an operator command's database, behind the data directory's lock (a running service holds it: exit 1) */
const withDatabase = <A>(cfg: AppConfig, effect: Effect.Effect<A, unknown, any>) =>
  Effect.runPromise(
    effect.pipe(
      Effect.provide(DatabaseLive.pipe(Layer.provideMerge(DataDirectoryLive), Layer.provideMerge(Config.layer(cfg)))),
      Effect.scoped
    ) as Effect.Effect<A>
  )

const main = async (argv: ReadonlyArray<string>) => {
  const [command, ...rest] = argv
  // `<command> --help` (anywhere after the command) prints that command's help instead of running it
  if (command !== undefined && !command.startsWith("-") && command !== "help" && rest.some((a) => a === "--help" || a === "-h")) {
    const known = COMMANDS.find((c) => c.name === `${command} ${rest[0] ?? ""}`) ?? COMMANDS.find((c) => c.name === command)
    const group = COMMANDS.filter((c) => c.name.startsWith(`${command} `))
    if (known !== undefined) process.stdout.write(commandHelp(known))
    else if (group.length > 0) process.stdout.write(group.map((c) => `  agent-auth ${c.usage}\n      ${c.does}`).join("\n") + "\n")
    else return fail(`unknown command "${command}"; see agent-auth --help`)
    return
  }
  switch (command) {
    case undefined:
    case "--help":
    case "-h":
    case "help":
      process.stdout.write(HELP + "\n")
      return
    case "--version":
    case "-v":
      process.stdout.write(`${versionLine()}\n`)
      return
    case "serve":
      return serve(config(process.env))
    case "dev":
      return serve(config({
        DATABASE_URL: "pglite://./.data",
        REDIS_URL: "memory://",
        AUTO_GENERATE_KEYS: "true",
        WEBHOOK_ALLOW_PRIVATE_HOSTS: "true",
        ...process.env
      }), { banner: true })
    case "migrate": {
      const cfg = config(databaseOnly(process.env))
      try {
        const applied = await withDatabase(cfg, runMigrations)
        process.stdout.write(`applied ${applied.length} migration(s)${applied.map(([id, name]) => `\n  ${id}_${name}`).join("")}\n`)
        process.exit(0)
      } catch (e) {
        return failStart("migration failed: ", e)
      }
      return
    }
    case "keys":
      if (rest[0] === "generate") {
        process.stdout.write(generateRsaPrivateKeyPem())
        return
      }
      return fail("usage: agent-auth keys generate")
    case "verify-export":
      process.exit(await runVerifyExport(rest, (line) => process.stdout.write(`${line}\n`)))
    default: {
      const operator = operatorCommands[`${command} ${rest[0] ?? ""}`]
      if (operator === undefined) return fail(`unknown command "${argv.join(" ")}"; see agent-auth --help`)
      const cfg = config(databaseOnly(process.env))
      try {
        const message = await withDatabase(cfg, operator(rest.slice(1), cfg))
        process.stdout.write(`${message}\n`)
        process.exit(0)
      } catch (e) {
        return failStart("", e)
      }
    }
  }
}

await main(process.argv.slice(2))
