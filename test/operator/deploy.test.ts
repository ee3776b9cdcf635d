/**
 * Running it (issue 18, item 6): the systemd unit parses and carries the hardening options, the
 * environment file example names only variables the service knows, and the README points to both.
 */
import { expect, test } from "bun:test"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { loadConfig, VARIABLES } from "../../src/Config.ts"

const unit = readFileSync("scripts/deploy/agent-auth.service", "utf8")
const envExample = readFileSync("scripts/deploy/agent-auth.env.example", "utf8")

/** `Key=value` lines per section, comments and blank lines skipped */
const sections = (text: string) => {
  const out: Record<string, Array<[string, string]>> = {}
  let current = ""
  for (const raw of text.split("\n")) {
    const line = raw.trim()
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue
    const header = /^\[([A-Za-z]+)\]$/.exec(line)
    if (header) {
      current = header[1]!
      out[current] = []
      continue
    }
    const eq = line.indexOf("=")
    expect(eq).toBeGreaterThan(0)
    expect(current).not.toBe("")
    out[current]!.push([line.slice(0, eq), line.slice(eq + 1)])
  }
  return out
}

test("the unit parses (systemd-analyze verify when present) and carries the hardening options", async () => {
  const parsed = sections(unit)
  expect(Object.keys(parsed)).toEqual(["Unit", "Service", "Install"])
  const service = new Map(parsed.Service!)
  expect(service.get("ExecStart")).toBe("/usr/local/bin/agent-auth serve")
  expect(service.get("EnvironmentFile")).toBe("/etc/agent-auth/agent-auth.env")
  for (const [key, value] of [["NoNewPrivileges", "yes"], ["ProtectSystem", "strict"], ["PrivateTmp", "yes"], ["ProtectHome", "yes"], ["ReadWritePaths", "/var/lib/agent-auth"], ["CapabilityBoundingSet", ""]]) {
    expect([key, service.get(key!)]).toEqual([key, value])
  }
  const analyze = Bun.which("systemd-analyze")
  if (analyze === null) return
  // verify checks that ExecStart exists: the same unit with a binary every machine has
  const dir = mkdtempSync(join(tmpdir(), "aas-unit-"))
  try {
    const path = join(dir, "agent-auth.service")
    writeFileSync(path, unit.replace("ExecStart=/usr/local/bin/agent-auth serve", `ExecStart=${Bun.which("true")}`))
    const child = Bun.spawn([analyze, "verify", "--man=no", path], { stdout: "pipe", stderr: "pipe" })
    const [stderr, code] = await Promise.all([new Response(child.stderr).text(), child.exited])
    // an unknown key or a bad value is only a warning to systemd: none may be printed
    expect([code, stderr]).toEqual([0, ""])
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test("the environment file example names only variables the Config table knows, and is a valid production configuration in shape", () => {
  const names = envExample.split("\n").map((l) => l.trim()).filter((l) => l !== "" && !l.startsWith("#")).map((l) => l.slice(0, l.indexOf("=")))
  const known = new Set(VARIABLES.map((v) => v.name))
  expect(names.filter((n) => !known.has(n))).toEqual([])
  expect(new Set(names).size).toBe(names.length)
  // the commented-out ones too
  const commented = [...envExample.matchAll(/^# ?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]!)
  expect(commented.filter((n) => !known.has(n))).toEqual([])
  // production requires these: the example lists them all
  for (const required of ["DATABASE_URL", "REDIS_URL", "RSA_PRIVATE_KEY", "VAULT_ENCRYPTION_KEYS", "VC_SIGNING_KEY", "METRICS_TOKEN", "SSO_STATE_SECRET"]) expect(names).toContain(required)
  // placeholders are refused by the loader (nobody runs the example unchanged by mistake)
  const env = Object.fromEntries(envExample.split("\n").filter((l) => /^[A-Z]/.test(l)).map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]))
  expect(() => loadConfig(env)).toThrow()
})

test("the README's operator section refers to the unit, the env example, and the backup note", () => {
  const readme = readFileSync("README.md", "utf8")
  const section = readme.slice(readme.indexOf("## Operating it"))
  expect(section).toContain("scripts/deploy/agent-auth.service")
  expect(section).toContain("scripts/deploy/agent-auth.env.example")
  expect(section).toContain("### Backup and restore")
})
