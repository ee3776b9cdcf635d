/**
 * Each entry's `metadata` in the key order of the request text (decisions §5: the hash covers
 * `JSON.stringify(metadata)` as sent, never re-sorted).
 *
 * JSON.parse keeps the order of ordinary keys but moves integer-like keys ("2", "10") to the front
 * of an object, so a device whose own serializer wrote `{"b":1,"2":0}` and hashed that would fail
 * with INVALID_HASH if only the parsed object were printed again. This reads the body a second
 * time, keeping every object's keys in the order written, and prints the metadata as
 * JSON.stringify prints (no spaces, the same string escapes and number forms). It runs only for
 * entries whose hash did not match the usual way, so a valid chain from a JavaScript device costs
 * nothing more.
 */

type Ordered =
  | { readonly kind: "object"; readonly members: Map<string, Ordered> }
  | { readonly kind: "array"; readonly items: ReadonlyArray<Ordered> }
  | { readonly kind: "scalar"; readonly text: string }

/** deeper than this is refused (no metadata an agent writes is that deep; a crafted body must not exhaust the stack) */
const MAX_DEPTH = 256

class Reader {
  private at = 0
  constructor(private readonly text: string) {}

  private space() {
    const t = this.text
    while (this.at < t.length) {
      const c = t.charCodeAt(this.at)
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.at++
      else break
    }
  }

  /** the raw text of a string token, quotes included */
  private stringToken(): string {
    const t = this.text
    const start = this.at
    if (t[this.at] !== "\"") throw new Error("string expected")
    this.at++
    while (this.at < t.length) {
      const c = t[this.at]
      if (c === "\\") this.at += 2
      else if (c === "\"") {
        this.at++
        return t.slice(start, this.at)
      } else this.at++
    }
    throw new Error("unterminated string")
  }

  value(depth: number): Ordered {
    if (depth > MAX_DEPTH) throw new Error("too deep")
    this.space()
    const c = this.text[this.at]
    if (c === "{") {
      this.at++
      // JSON.parse's rule for a repeated key: the first one's place, the last one's value
      const members = new Map<string, Ordered>()
      this.space()
      if (this.text[this.at] === "}") {
        this.at++
        return { kind: "object", members }
      }
      for (;;) {
        this.space()
        const key = JSON.parse(this.stringToken()) as string
        this.space()
        if (this.text[this.at] !== ":") throw new Error("colon expected")
        this.at++
        members.set(key, this.value(depth + 1))
        this.space()
        const next = this.text[this.at++]
        if (next === "}") return { kind: "object", members }
        if (next !== ",") throw new Error("comma expected")
      }
    }
    if (c === "[") {
      this.at++
      const items: Array<Ordered> = []
      this.space()
      if (this.text[this.at] === "]") {
        this.at++
        return { kind: "array", items }
      }
      for (;;) {
        items.push(this.value(depth + 1))
        this.space()
        const next = this.text[this.at++]
        if (next === "]") return { kind: "array", items }
        if (next !== ",") throw new Error("comma expected")
      }
    }
    if (c === "\"") return { kind: "scalar", text: this.stringToken() }
    const start = this.at
    while (this.at < this.text.length && !/[\s,\]}]/.test(this.text[this.at]!)) this.at++
    if (this.at === start) throw new Error("value expected")
    return { kind: "scalar", text: this.text.slice(start, this.at) }
  }
}

/** Printed as JSON.stringify prints a parsed value, except that object keys keep their written order. */
const print = (v: Ordered): string => {
  switch (v.kind) {
    case "scalar":
      // strings and numbers in JSON.stringify's own form (escapes, 1.0 → 1, 1e400 → null)
      return JSON.stringify(JSON.parse(v.text))
    case "array":
      return `[${v.items.map(print).join(",")}]`
    case "object": {
      const parts: Array<string> = []
      for (const [key, value] of v.members) parts.push(`${JSON.stringify(key)}:${print(value)}`)
      return `{${parts.join(",")}}`
    }
  }
}

/**
 * For a sync body's text: each entry's metadata printed in written key order (undefined where an
 * entry has none), or undefined when the text cannot be read this way.
 */
export const metadataAsSent = (body: string): Array<string | undefined> | undefined => {
  try {
    const top = new Reader(body).value(0)
    if (top.kind !== "object") return undefined
    const entries = top.members.get("entries")
    if (entries === undefined || entries.kind !== "array") return undefined
    return entries.items.map((entry) => {
      const metadata = entry.kind === "object" ? entry.members.get("metadata") : undefined
      return metadata === undefined ? undefined : print(metadata)
    })
  } catch {
    return undefined
  }
}
