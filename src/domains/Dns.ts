/**
 * DNS TXT lookups for domain verification. The resolver is DNS_RESOLVER (`host:port`, or
 * `[v6]:port`) when set, else the system's. Each lookup uses its own Resolver so interrupting it
 * cancels exactly its queries.
 */
import { Effect } from "effect"
import { Resolver } from "node:dns"

export type TxtLookup =
  | { readonly _tag: "Found"; readonly records: ReadonlyArray<string> }
  | { readonly _tag: "Missing" }
  | { readonly _tag: "Failed"; readonly reason: string }

const MISSING = new Set(["ENOTFOUND", "ENODATA", "NOTFOUND", "NODATA"])

export const lookupTxt = (name: string, server: string | undefined): Effect.Effect<TxtLookup> =>
  Effect.async<TxtLookup>((resume) => {
    const resolver = new Resolver({ timeout: 3000, tries: 2 })
    try {
      if (server !== undefined) resolver.setServers([server])
    } catch (e) {
      resume(Effect.succeed({ _tag: "Failed", reason: `DNS_RESOLVER is not usable: ${(e as Error).message}` }))
      return
    }
    resolver.resolveTxt(name, (error, records) => {
      if (error) {
        const code = (error as NodeJS.ErrnoException).code ?? ""
        resume(Effect.succeed(MISSING.has(code) ? { _tag: "Missing" } : { _tag: "Failed", reason: code || error.message }))
        return
      }
      // A TXT record may be split in several character-strings: they form one value.
      resume(Effect.succeed({ _tag: "Found", records: records.map((chunks) => chunks.join("")) }))
    })
    return Effect.sync(() => resolver.cancel())
  })
