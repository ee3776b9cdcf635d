#!/usr/bin/env bun
/**
 * agent-auth: the service's command line and the entry of the single binary.
 *   serve | migrate | dev | developers set-plan <id> <plan> | keys generate | vault rekey | --version | --help
 */
import { Effect, Layer } from "effect"
import pkg from "../package.json" with { type: "json" }
import { ConfigError, loadConfig, type AppConfig } from "./Config.ts"
import { Config } from "./Config.ts"
import { DatabaseLive } from "./platform/Database.ts"
import { generateRsaPrivateKeyPem } from "./platform/Keys.ts"
import { runMigrations } from "./platform/Migrate.ts"
import { startServer } from "./Server.ts"
import { operatorCommands } from "./operator.ts"

const HELP = `agent-auth ${pkg.version}: authorization service for software agents

Usage:
  agent-auth serve                      start the service (applies pending migrations unless MIGRATE_ON_START=false)
  agent-auth migrate                    apply pending migrations and exit
  agent-auth dev                        embedded mode: PGlite under ./.data, in-memory counters, generated keys
  agent-auth developers set-plan <developerId> <plan>   (also: billing set-plan)
  agent-auth billing close-period [--period YYYY-MM]   invoice a month that has ended (default: last month)
  agent-auth billing mark-paid <invoiceId>
  agent-auth keys generate              print a new RSA private key (PEM) for RSA_PRIVATE_KEY
  agent-auth vault rekey                re-encrypt vault credentials and webhook secrets under the active key
  agent-auth --version | --help

Configuration is read from the environment; see README.md.`

const fail = (message: string): never => {
  process.stderr.write(`agent-auth: ${message}\n`)
  process.exit(1)
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

const serve = async (cfg: AppConfig) => {
  let server
  try {
    server = await startServer(cfg)
  } catch (e) {
    return fail(`could not start: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`)
  }
  process.stdout.write(JSON.stringify({ level: "INFO", message: "listening", url: `http://${cfg.host}:${server.port}` }) + "\n")
  let closing = false
  const shutdown = async (signal: string) => {
    if (closing) return
    closing = true
    process.stdout.write(JSON.stringify({ level: "INFO", message: "shutting down", signal }) + "\n")
    await server.stop()
    process.exit(0)
  }
  process.on("SIGTERM", () => void shutdown("SIGTERM"))
  process.on("SIGINT", () => void shutdown("SIGINT"))
}

const withDatabase = <A>(cfg: AppConfig, effect: Effect.Effect<A, unknown, any>) =>
  Effect.runPromise(
    effect.pipe(Effect.provide(DatabaseLive.pipe(Layer.provideMerge(Config.layer(cfg)))), Effect.scoped) as Effect.Effect<A>
  )

const main = async (argv: ReadonlyArray<string>) => {
  const [command, ...rest] = argv
  switch (command) {
    case undefined:
    case "--help":
    case "-h":
    case "help":
      process.stdout.write(HELP + "\n")
      return
    case "--version":
    case "-v":
      process.stdout.write(`${pkg.version}\n`)
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
      }))
    case "migrate": {
      const cfg = config(databaseOnly(process.env))
      try {
        const applied = await withDatabase(cfg, runMigrations)
        process.stdout.write(`applied ${applied.length} migration(s)${applied.map(([id, name]) => `\n  ${id}_${name}`).join("")}\n`)
        process.exit(0)
      } catch (e) {
        return fail(`migration failed: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`)
      }
      return
    }
    case "keys":
      if (rest[0] === "generate") {
        process.stdout.write(generateRsaPrivateKeyPem())
        return
      }
      return fail("usage: agent-auth keys generate")
    default: {
      const operator = operatorCommands[`${command} ${rest[0] ?? ""}`]
      if (operator === undefined) return fail(`unknown command "${argv.join(" ")}"; see agent-auth --help`)
      const cfg = config(databaseOnly(process.env))
      try {
        const message = await withDatabase(cfg, operator(rest.slice(1), cfg))
        process.stdout.write(`${message}\n`)
        process.exit(0)
      } catch (e) {
        return fail(e instanceof Error ? e.message.split("\n")[0]! : String(e))
      }
    }
  }
}

await main(process.argv.slice(2))
