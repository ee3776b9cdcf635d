/**
 * Serving status lists (decisions §18): each list signed at most once per change, in three forms
 * (a `vc+jwt` BitstringStatusListCredential, its claims as JSON with the JWS, an IETF
 * `statuslist+jwt` for SD-JWT VCs), kept beside the list so restarts and other instances reuse them.
 *
 * Reads are answered from memory. A list changed by this process is marked until a read sees the
 * new version (so the change shows at once here, committed or not yet); a change by another
 * instance is notified at its commit (LISTEN, see Service.ts), and shows within FRESH_MS at worst
 * (a lost notification, embedded mode), when a cached list is checked again.
 */
import { Effect } from "effect"
import type { VcKeyService } from "./Keys.ts"
import { statusListClaims, statusListUrl, tokenStatusListClaims } from "./Formats.ts"
import type { ListRow, Repo } from "./Repo.ts"
import { bitAt, encodeBitstring, encodeTokenStatusList, LIST_TTL_SECONDS } from "./StatusList.ts"

const FRESH_MS = 2_000
/** a mark whose change never committed (rolled back) stops forcing reads after this long */
const MARK_MS = 30_000
const CACHE_MAX = 5_000

export type ListForm = "vc" | "json" | "tokenList"

export interface ServedList {
  readonly body: string
  readonly contentType: string
  readonly etag: string
}

interface Entry {
  readonly row: ListRow
  readonly partner: ListRow | undefined
  readonly loadedAt: number
  readonly forms: Map<ListForm, ServedList>
}

export interface StatusLists {
  /** the list's row and its partner's, fresh as described above; undefined when there is no such list */
  readonly read: (listId: string) => Effect.Effect<{ row: ListRow; partner: ListRow | undefined } | undefined>
  /** a signed form of the list, or undefined when there is no such list */
  readonly serve: (listId: string, form: ListForm) => Effect.Effect<ServedList | undefined>
  /** whether the credential's bit is set in the list (undefined: no such list, fail closed) */
  readonly bit: (listId: string, index: number) => Effect.Effect<{ set: boolean; purpose: string; partnerSet: boolean | undefined } | undefined>
  /** a change committed elsewhere (notified with "<list id> <partner id>"): both are read again */
  readonly forget: (payload: string) => void
  /** called in the changing transaction with the lists it touched */
  readonly changed: (lists: ReadonlyArray<{ readonly listId: string; readonly partnerId: string; readonly version: number }>) => void
}

const contentTypes: Record<ListForm, string> = {
  vc: "application/vc+jwt",
  json: "application/json",
  tokenList: "application/statuslist+jwt"
}

export const makeLists = (deps: { repo: Repo; keys: VcKeyService; rsaKid: string; baseUrl: string }): StatusLists => {
  const { repo, keys } = deps
  const cache = new Map<string, Entry>()
  /** list id → the change it waits to see: which list (itself or its partner) reaches which version */
  const marked = new Map<string, { at: number; listId: string; version: number }>()
  const signing = new Map<string, Promise<string>>()

  const load = (listId: string) =>
    Effect.gen(function*() {
      if (!/^vcsl_[0-9A-Z]{26}$/.test(listId)) return undefined
      const { row: first, partner } = yield* repo.listPair(listId).pipe(Effect.orDie)
      if (first === undefined) return undefined
      const previous = cache.get(listId)
      const entry: Entry = previous !== undefined && previous.row.version === first.version &&
          previous.partner?.version === partner?.version
        ? { ...previous, loadedAt: Date.now() }
        : { row: first, partner, loadedAt: Date.now(), forms: new Map() }
      if (cache.size >= CACHE_MAX) cache.clear()
      cache.set(listId, entry)
      return entry
    })

  const current = (listId: string) =>
    Effect.suspend(() => {
      const hit = cache.get(listId)
      const mark = marked.get(listId)
      if (mark !== undefined && Date.now() - mark.at > MARK_MS) marked.delete(listId)
      if (hit !== undefined && !marked.has(listId) && Date.now() - hit.loadedAt < FRESH_MS) return Effect.succeed(hit)
      return Effect.map(load(listId), (entry) => {
        // the marked change is visible once the version moved past the one cached when it was marked
        if (entry !== undefined && mark !== undefined) {
          const seen = entry.row.id === mark.listId ? entry.row.version : entry.partner?.version ?? 0
          if (seen >= mark.version) marked.delete(listId)
        }
        return entry
      })
    })

  /** one signature per (list, form, version, key), however many readers ask at once */
  const signOnce = (key: string, make: () => Promise<string>) => {
    let pending = signing.get(key)
    if (pending === undefined) {
      pending = make().finally(() => setTimeout(() => signing.delete(key), 1000))
      signing.set(key, pending)
    }
    return pending
  }

  const signedVc = (entry: Entry) =>
    Effect.gen(function*() {
      const { row } = entry
      const stored = row.signed?.vc
      if (stored !== undefined && stored.version === row.version && stored.kid === keys.current.kid) return stored.jwt
      const url = statusListUrl(deps.baseUrl, row.id)
      const jwt = yield* Effect.promise(() =>
        signOnce(`${row.id}/vc/${row.version}`, () =>
          Effect.runPromise(keys.sign(
            statusListClaims({
              issuer: keys.did,
              url,
              purpose: row.purpose,
              encodedList: encodeBitstring(row.bits),
              updatedAt: row.updatedAt,
              nowSeconds: Math.floor(Date.now() / 1000)
            }),
            { typ: "vc+jwt", cty: "vc" }
          ))))
      yield* repo.storeSigned(row.id, "vc", { version: row.version, kid: keys.current.kid, jwt }).pipe(Effect.ignore)
      return jwt
    })

  const signedTokenList = (entry: Entry) =>
    Effect.gen(function*() {
      const { row, partner } = entry
      const revocation = row.purpose === "revocation" ? row : partner
      const suspension = row.purpose === "suspension" ? row : partner
      const version = row.version + (partner?.version ?? 0)
      const stored = row.signed?.tokenList
      if (stored !== undefined && stored.version === version && stored.kid === keys.current.kid) return stored.jwt
      const url = statusListUrl(deps.baseUrl, row.id)
      const jwt = yield* Effect.promise(() =>
        signOnce(`${row.id}/tokenList/${version}`, () =>
          Effect.runPromise(keys.sign(
            tokenStatusListClaims({
              issuer: keys.did,
              url,
              lst: encodeTokenStatusList(revocation?.bits ?? new Uint8Array(row.size / 8), suspension?.bits ?? new Uint8Array(row.size / 8)),
              nowSeconds: Math.floor(Date.now() / 1000)
            }),
            { typ: "statuslist+jwt" }
          ))))
      yield* repo.storeSigned(row.id, "tokenList", { version, kid: keys.current.kid, jwt }).pipe(Effect.ignore)
      return jwt
    })

  const serve: StatusLists["serve"] = (listId, form) =>
    Effect.gen(function*() {
      const entry = yield* current(listId)
      if (entry === undefined) return undefined
      const ready = entry.forms.get(form)
      if (ready !== undefined) return ready
      let body: string
      if (form === "tokenList") body = yield* signedTokenList(entry)
      else {
        const jwt = yield* signedVc(entry)
        body = form === "vc" ? jwt : JSON.stringify({ ...JSON.parse(Buffer.from(jwt.split(".")[1]!, "base64url").toString("utf8")), jwt })
      }
      const version = form === "tokenList" ? `${entry.row.version}.${entry.partner?.version ?? 0}` : String(entry.row.version)
      const served = { body, contentType: contentTypes[form], etag: `"${listId}.${version}.${form}.${keys.current.kid.slice(0, 8)}"` }
      entry.forms.set(form, served)
      return served
    })

  const read: StatusLists["read"] = (listId) =>
    Effect.map(current(listId), (entry) => entry === undefined ? undefined : { row: entry.row, partner: entry.partner })

  const bit: StatusLists["bit"] = (listId, index) =>
    Effect.map(current(listId), (entry) =>
      entry === undefined || index < 0 || index >= entry.row.size
        ? undefined
        : { set: bitAt(entry.row.bits, index), purpose: entry.row.purpose, partnerSet: entry.partner ? bitAt(entry.partner.bits, index) : undefined })

  const changed: StatusLists["changed"] = (lists) => {
    const at = Date.now()
    for (const { listId, partnerId, version } of lists) {
      marked.set(listId, { at, listId, version })
      // the partner's IETF view carries this list's bits too
      marked.set(partnerId, { at, listId, version })
    }
  }

  const forget: StatusLists["forget"] = (payload) => {
    for (const id of payload.split(" ")) cache.delete(id)
  }

  return { read, serve, bit, changed, forget }
}

export { LIST_TTL_SECONDS }
