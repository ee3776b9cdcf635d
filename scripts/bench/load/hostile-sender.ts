/**
 * The attacker of scripts/bench/hostile.ts, in a process of its own: building and sending 17 MB of
 * SAML bodies from the service's own event loop measured the load generator as much as the service.
 * Two messages per burst: { prepare: { kinds, hostile, attacker } } builds the requests (a real sender
 * has them ready) and answers { prepared: true }; { go: true } sends them all at once and answers
 * { answers, ms } (each answer "status code").
 */
import { type Attacker, inputsOf, type Send } from "./hostile-inputs.ts"

interface Order {
  readonly kinds: ReadonlyArray<"cedar" | "saml" | "scim">
  readonly hostile: boolean
  readonly attacker: Attacker
}

const answerOf = async (r: Response) => {
  const body = await r.json().catch(() => undefined) as { code?: string; scimType?: string } | undefined
  return `${r.status} ${body?.code ?? body?.scimType ?? ""}`
}

let prepared: Array<Send> = []

process.on("message", async (message: { prepare?: Order; go?: true }) => {
  if (message.prepare !== undefined) {
    const order = message.prepare
    prepared = order.kinds.flatMap((kind) => inputsOf(kind, order.hostile, order.attacker))
      .map((s) => ({ ...s, path: order.attacker.url + s.path }))
    return process.send!({ prepared: true })
  }
  const sends = prepared
  const started = performance.now()
  const answers = await Promise.all(sends.map((s) =>
    fetch(s.path, { method: s.method, headers: s.headers, body: s.body }).then(answerOf, (e) => `failed ${String(e)}`)
  ))
  process.send!({ answers, ms: performance.now() - started })
})
process.send!({ ready: true })
