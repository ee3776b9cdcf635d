/**
 * Issue 27, target 3: vault exchanges per second against their full floor, a bare Bun.serve handler
 * doing an exchange's work (floors.ts): the RS256 check of the grant token (node:crypto, the same
 * call; its claims remembered by the token's text as the service's Keys.verify does), the gate's one
 * Redis call (the token's route window), the online grant/agent check and the credential read (the
 * service's statement text, through its pg pool), the AES-GCM decrypt (src/vault/Crypto.ts), and the
 * committed event and audit-chain entry (the service's one conditional statement, chained in memory
 * on the known head). Like the service, the floor shares statements among the exchanges in flight:
 * one read per batch (two batches at a time) and one commit per batch (group commit), so both do the
 * same database work. Target ≥ 65%. A diagnostic row compares with a floor that makes the RS256
 * check on every request (the service does not: it remembers a verified token).
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { createPublicKey, type KeyObject, randomBytes, verify as cryptoVerify } from "node:crypto"
import { Grants } from "../../src/grants/Service.ts"
import { WRITE_ON_HEAD_SQL } from "../../src/platform/AuditedEvents.ts"
import { chainEntries, entryColumnParams, entryV2Params } from "../../src/platform/AuditChain.ts"
import { DELIVERY_CHANNEL } from "../../src/platform/Events.ts"
import { newId } from "../../src/platform/Ids.ts"
import { Keys } from "../../src/platform/Keys.ts"
import { openSync, VaultKeys } from "../../src/vault/Crypto.ts"
import { FIND_FOR_EXCHANGE_SQL } from "../../src/vault/Repo.ts"
import { exchangeService, Vault } from "../../src/vault/Service.ts"
import { compare, type FloorKit, floorKit, serveFloor } from "./floors.ts"
import { makeCpuTally, row, startBenchServer } from "./support.ts"

const PRINCIPALS = 16

/** Concurrent calls go together: the first runs at once, the ones arriving meanwhile in the next batch. */
const coalesce = <K, V>(run: (keys: Array<K>) => Promise<Array<V>>, parallel = 1, max = 256) => {
  const queue: Array<{ key: K; resolve: (v: V) => void; reject: (e: unknown) => void }> = []
  let running = 0
  const drain = async () => {
    while (queue.length > 0) {
      const batch = queue.splice(0, max)
      try {
        const out = await run(batch.map((b) => b.key))
        batch.forEach((b, i) => b.resolve(out[i]!))
      } catch (e) {
        batch.forEach((b) => b.reject(e))
      }
    }
    running--
  }
  return (key: K) =>
    new Promise<V>((resolve, reject) => {
      queue.push({ key, resolve, reject })
      if (running < parallel) {
        running++
        void drain()
      }
    })
}

interface AuditItem {
  readonly developerId: string
  readonly data: Record<string, unknown>
  readonly audit: { action: string; agentId: string | null; agentDid: string | null; grantId: string; principalId: string; metadata: Record<string, unknown> }
}

const makeExchangeFloor = (kit: FloorKit, publicKeys: Map<string, KeyObject>, issuer: string, ring: any, maxAttempts: number, remember: boolean) => {
  const { pool } = kit
  const verified = new Map<string, any>()
  const claimsOf = (token: string) => {
    let claims = remember ? verified.get(token) : undefined
    if (claims === undefined) {
      const parts = token.split(".")
      if (parts.length !== 3) return undefined
      const [h, p, s] = parts as [string, string, string]
      const header = JSON.parse(Buffer.from(h, "base64url").toString())
      const key = header.alg === "RS256" ? publicKeys.get(header.kid) : undefined
      if (key === undefined || !cryptoVerify("sha256", Buffer.from(`${h}.${p}`), key, Buffer.from(s, "base64url"))) return undefined
      claims = JSON.parse(Buffer.from(p, "base64url").toString())
      if (claims.iss !== issuer || typeof claims.exp !== "number" || !Array.isArray(claims.scp)) return undefined
      if (remember) verified.set(token, claims)
    }
    return claims.exp > Date.now() / 1000 - 60 ? claims : undefined
  }
  const read = coalesce(async (keys: Array<{ grnt: string; jti: string; dev: string; sub: string; service: string | null }>) => {
    const { rows } = await pool.query(FIND_FOR_EXCHANGE_SQL, [
      keys.map((k) => k.grnt), keys.map((k) => k.jti), keys.map((k) => k.dev), keys.map((k) => k.sub), keys.map((k) => k.service)
    ])
    const out: Array<any> = keys.map(() => undefined)
    for (const r of rows) out[Number(r.n) - 1] = r
    return out
  }, 2)
  const heads = new Map<string, { seq: number; hash: string | null }>()
  const record = coalesce(async (items: Array<AuditItem>) => {
    const byDeveloper = new Map<string, Array<AuditItem>>()
    for (const item of items) byDeveloper.set(item.developerId, [...(byDeveloper.get(item.developerId) ?? []), item])
    for (const [developerId, group] of byDeveloper) {
      const ms = Date.now()
      let done = false
      for (let attempt = 0; attempt < 3 && !done; attempt++) {
        let head = heads.get(developerId)
        if (head === undefined) {
          const { rows: [r] } = await pool.query("SELECT seq, hash FROM audit_heads WHERE developer_id = $1", [developerId])
          head = { seq: Number(r.seq), hash: r.hash }
        }
        const chained = chainEntries(developerId, head, group.map((item) => ({ ...item.audit, developerId })), ms)
        const { rows: [row] } = await pool.query(WRITE_ON_HEAD_SQL, [
          developerId, chained.timestamp, new Date(ms), ...entryColumnParams(chained.cols), head.seq, head.hash,
          chained.seq, chained.prevHash, group.map(() => newId("evt", ms)), group.map(() => "vault.credential.exchanged"),
          group.map((item) => JSON.stringify(item.data)), maxAttempts, DELIVERY_CHANNEL, ...entryV2Params(chained.cols)
        ])
        if (Number(row.applied) === 1) {
          heads.set(developerId, { seq: chained.seq, hash: chained.prevHash })
          done = true
        } else heads.delete(developerId)
      }
      if (!done) throw new Error("audit head kept moving")
    }
    return items.map(() => true)
  })
  const fail = (status: number, code: string) => Response.json({ code }, { status })
  const handler = async (request: Request): Promise<Response> => {
    const bearer = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.get("authorization") ?? "")?.[1]
    const claims = bearer === undefined ? undefined : claimsOf(bearer)
    if (claims === undefined) return fail(401, "UNAUTHORIZED")
    if (!(await kit.grantGate(claims.jti, 20))) return fail(429, "RATE_LIMITED")
    const service = exchangeService(await request.text())
    const r = await read({
      grnt: claims.grnt, jti: claims.jti, dev: claims.dev, sub: claims.sub,
      service: service === undefined || !/^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/.test(service) ? null : service
    })
    const now = Date.now()
    if (r === undefined || r.grant_status !== "active" || r.grant_developer_id !== claims.dev || r.token_revoked_at !== null ||
      r.agent_status !== "active" || r.grant_expires_at.getTime() <= now) return fail(401, "UNAUTHORIZED")
    if (service === undefined) return fail(400, "INVALID_REQUEST")
    if (!claims.scp.includes(`${service}:read`)) return fail(403, "FORBIDDEN")
    if (r.id === null) return fail(404, "NOT_FOUND")
    const plain = openSync(ring, { id: r.id, developerId: r.developer_id, principalId: r.principal_id, service: r.service }, { keyId: r.key_id, iv: r.iv, ciphertext: r.ciphertext })
    if (typeof plain !== "string") return fail(500, "CREDENTIAL_UNREADABLE")
    const secrets = JSON.parse(plain)
    const agentId = claims.agt.split(":").slice(2).join(":")
    await record({
      developerId: claims.dev,
      data: { credentialId: r.id, service: r.service, principalId: r.principal_id, grantId: claims.grnt, agentId, tokenId: claims.jti, refreshed: false },
      audit: {
        action: "service.vault.credential_exchanged", agentId, agentDid: claims.agt, grantId: claims.grnt, principalId: claims.sub,
        metadata: { credentialId: r.id, service: r.service, tokenId: claims.jti, refreshed: false }
      }
    })
    return Response.json({
      accessToken: secrets.accessToken, service: r.service, credentialType: r.credential_type,
      tokenExpiresAt: r.token_expires_at?.toISOString() ?? null, metadata: r.metadata ?? {}
    })
  }
  return { ...serveFloor(handler), handler }
}

export async function run(): Promise<Record<string, unknown>> {
  const server = await startBenchServer({ VAULT_ENCRYPTION_KEYS: `bench:${randomBytes(32).toString("base64")}` })
  const kit = await floorKit(server)
  const floors: Array<{ stop: () => void }> = []
  try {
    const signup = await fetch(`${server.url}/v1/signup`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "vault-bench" })
    }).then((r) => r.json() as Promise<{ apiKey: string; developerId: string }>)
    const apiKey = signup.apiKey
    const developerId = signup.developerId
    await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`UPDATE developers SET plan = 'enterprise' WHERE id = ${developerId}`))
    const agentId = newId("ag")
    await server.run(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      sql.unsafe(`INSERT INTO agents (id, developer_id, name, description, scopes, status, created_at, updated_at)
                  VALUES ($1, $2, 'bench', NULL, $3, 'active', now(), now())`, [agentId, developerId, ["github:read"]] as any)))

    const tokens: Array<string> = []
    for (let i = 0; i < PRINCIPALS; i++) {
      const principalId = `bench_user_${i}`
      const stored = await fetch(`${server.url}/v1/vault/credentials`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ principalId, service: "github", accessToken: `gho_${randomBytes(20).toString("hex")}`, metadata: { i } })
      })
      if (stored.status !== 201) throw new Error(`store failed: ${stored.status}`)
      tokens.push(await server.run(Effect.gen(function*() {
        const grants = yield* Grants
        const grant = yield* grants.create({ developerId, agentId, principalId, scopes: ["github:read"], expiresAt: new Date(Date.now() + 3600_000), approvalMethod: "developer", policyId: null })
        return (yield* grants.issueToken(grant)).grantToken
      })))
    }

    const keys = await server.run(Keys)
    const publicKeys = new Map(keys.jwks.keys.map((k: any) => [k.kid, createPublicKey({ key: { kty: k.kty, n: k.n, e: k.e }, format: "jwk" })]))
    const ring = await server.run(VaultKeys)
    const floorArgs = [kit, publicKeys, server.config.jwtIssuer, ring, server.config.webhooks.maxAttempts] as const
    const floor = makeExchangeFloor(...floorArgs, true)
    const everyTime = makeExchangeFloor(...floorArgs, false)
    floors.push(floor, everyTime)

    let next = 0
    const exchange = (base: string) => () => {
      const token = tokens[next++ % tokens.length]!
      return fetch(`${base}/v1/vault/credentials/exchange`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: '{"service":"github"}'
      }).then(async (r) => r.status === 200 && typeof ((await r.json()) as any).accessToken === "string")
    }
    // the developer's chain gets its head from a first exchange (the floor only writes on a head)
    if (!(await exchange(server.url)())) throw new Error("exchange failed")
    const requests = tokens.map((token) => ({
      method: "POST", path: "/v1/vault/credentials/exchange",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` }, body: '{"service":"github"}'
    }))
    const target = (url: string, pid: number) => ({ url, pid, requests, expectBody: '"accessToken"' })
    const results = await compare([
      { name: "POST /v1/vault/credentials/exchange", service: target(server.url, server.pid), floor: target(floor.url, process.pid), target: 0.65 },
      { name: "  diagnostic: floor with RS256 on every request", service: target(server.url, server.pid), floor: target(everyTime.url, process.pid) }
    ], { rounds: 3 })
    // Where the difference lies: the exchange's own path (vault.exchange in the service's runtime,
    // given verified claims) and the floor's whole handler (gate and verify included), both called
    // without HTTP, 16 at a time: event-loop CPU per call.
    const claimsList = await Promise.all(tokens.map((t) => server.run(keys.verify(t, Math.floor(Date.now() / 1000)))))
    const vault = await server.run(Vault)
    let k = 0
    const direct = () => server.run(vault.exchange(claimsList[k++ % claimsList.length], '{"service":"github"}')).then((out) => typeof out.accessToken === "string")
    const floorDirect = () =>
      floor.handler(new Request("http://floor/v1/vault/credentials/exchange", {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${tokens[k++ % tokens.length]}` },
        body: '{"service":"github"}'
      })).then(async (r) => (await r.arrayBuffer(), r.status === 200))
    const tallies = { direct: makeCpuTally(), floorDirect: makeCpuTally() }
    for (let i = 0; i < 2; i++) {
      await tallies.direct.measure(direct, 1.5)
      await tallies.floorDirect.measure(floorDirect, 1.5)
    }
    const without = { direct: Math.round(tallies.direct.perRequest().main), floorDirect: Math.round(tallies.floorDirect.perRequest().main) }
    row("  diagnostic: event loop µs per call without HTTP (vault.exchange vs the floor's handler with gate + verify)", without.direct, without.floorDirect)
    // the chain both wrote to is still one valid chain
    const chain = await fetch(`${server.url}/v1/audit/verify`, { headers: { authorization: `Bearer ${apiKey}` } }).then((r) => r.json() as Promise<any>)
    if (chain.valid !== true) throw new Error(`audit chain broken: ${JSON.stringify(chain)}`)
    return { ...results, eventLoopMicrosWithoutHttp: without }
  } finally {
    for (const f of floors) f.stop()
    await server.stop()
  }
}

if (import.meta.main) {
  await run()
  process.exit(0)
}
