/** Ed25519 verification of entry hashes with node:crypto (native), public keys cached as KeyObjects. */
import { createPublicKey, type KeyObject, verify } from "node:crypto"

const keyCache = new Map<string, KeyObject>()

const keyFor = (pem: string): KeyObject | undefined => {
  let key = keyCache.get(pem)
  if (key === undefined) {
    try {
      key = createPublicKey(pem)
    } catch {
      return undefined
    }
    if (keyCache.size > 10_000) keyCache.clear()
    keyCache.set(pem, key)
  }
  return key
}

const HEX_SIGNATURE = /^[0-9a-fA-F]{128}$/

/** For each message (the entry's 64-char hash) and hex signature: 1 when any of the keys verifies it. */
export const verifyBatch = (messages: ReadonlyArray<string>, signatures: ReadonlyArray<string>, pems: ReadonlyArray<string>): Uint8Array => {
  const keys = pems.map(keyFor).filter((k): k is KeyObject => k !== undefined)
  const results = new Uint8Array(messages.length)
  for (let i = 0; i < messages.length; i++) {
    const signature = signatures[i]!
    if (!HEX_SIGNATURE.test(signature)) continue
    const sig = Buffer.from(signature, "hex")
    const data = Buffer.from(messages[i]!, "utf8")
    for (const key of keys) {
      if (verify(null, data, key, sig)) {
        results[i] = 1
        break
      }
    }
  }
  return results
}
