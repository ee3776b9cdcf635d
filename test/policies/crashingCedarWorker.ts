/**
 * The Cedar parser's worker (src/policies/cedarWorker.ts) with two faults a set can set off, for
 * workers.test.ts: a set holding `// crash the worker` ends the thread as a crash of the engine's
 * host would, one holding `// hang the worker` keeps it busy past the pool's answer timeout.
 */
import "../../src/policies/cedarWorker.ts"

declare const self: Worker

const real = self.onmessage!
self.onmessage = (event: MessageEvent) => {
  const text = (event.data as { text?: string }).text
  if (text?.includes("// crash the worker")) process.exit(1)
  if (text?.includes("// hang the worker")) for (const end = Date.now() + 5_000; Date.now() < end;);
  real.call(self, event)
}
