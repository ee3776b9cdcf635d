/**
 * The linear pre-scan of Cedar text before the engine sees it (decisions §19, revised): at most
 * MAX_NESTING levels of `(`, `[` and `{` and MAX_POLICY_BYTES per policy. cedar-wasm parses by
 * recursion on a fixed wasm stack: ~150 nested brackets (0.5 KiB of text) overflow it.
 *
 * Ours, beyond §19's figures: at most MAX_OPERATORS operators per policy (`&&` `||` comparisons,
 * arithmetic, `!`, `.`, `if` `in` `has` `like` `is`). A chain of operators nests in the engine as
 * brackets do: 1,000-1,500 of them (`a && a && …`, `x.a.a…`, else-if chains) overflow the same
 * stack after ~0.5 s of work, within 64 KiB; a policy a person writes has a few dozen.
 *
 * Brackets are counted outside string literals ("...", backslash escapes) and comments (`//` to
 * the end of the line). A policy ends at a `;` outside brackets; text after the last `;` counts as
 * one more. Anything else malformed (an unclosed string, a stray `)`) is left to the engine.
 */
export const MAX_NESTING = 32
export const MAX_POLICY_BYTES = 64 * 1024
export const MAX_OPERATORS = 256

export type ScanProblem = { readonly path: string; readonly message: string }

const OPEN = new Set(["(", "[", "{"])
const CLOSE = new Set([")", "]", "}"])
/** one-character operators; `&&` `||` `==` `!=` `<=` `>=` count once (the second character is skipped) */
const OPERATOR = new Set(["&", "|", "=", "!", "<", ">", "+", "-", "*", "."])
const KEYWORDS = new Set(["if", "in", "has", "like", "is"])
const IDENTIFIER = /[A-Za-z_]/

export const scanCedar = (text: string): ScanProblem | undefined => {
  let depth = 0
  let policy = 0
  let start = 0
  const tooBig = (end: number) =>
    Buffer.byteLength(text.slice(start, end)) > MAX_POLICY_BYTES
      ? { path: "content", message: `policy ${policy + 1} of the set is over ${MAX_POLICY_BYTES} bytes (at most ${MAX_POLICY_BYTES / 1024} KiB per policy)` }
      : undefined
  let operators = 0
  const operator = () =>
    ++operators > MAX_OPERATORS
      ? { path: "content", message: `policy ${policy + 1} of the set has more than ${MAX_OPERATORS} operators (&&, ||, comparisons, arithmetic, ., if)` }
      : undefined
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (OPERATOR.has(c)) {
      const next = text[i + 1]
      if ((c === "&" && next === "&") || (c === "|" && next === "|") || (next === "=" && "=!<>".includes(c))) i++
      const problem = operator()
      if (problem !== undefined) return problem
    } else if (IDENTIFIER.test(c)) {
      let end = i + 1
      while (end < text.length && /[A-Za-z0-9_]/.test(text[end]!)) end++
      if (KEYWORDS.has(text.slice(i, end))) {
        const problem = operator()
        if (problem !== undefined) return problem
      }
      i = end - 1
    } else if (c === '"') {
      // a string: skip to its closing quote, stepping over escapes
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++
    } else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i++
    } else if (OPEN.has(c)) {
      if (++depth > MAX_NESTING) {
        return { path: "content", message: `policy ${policy + 1} of the set nests (, [ and { deeper than ${MAX_NESTING} levels` }
      }
    } else if (CLOSE.has(c)) {
      if (depth > 0) depth--
    } else if (c === ";" && depth === 0) {
      const problem = tooBig(i + 1)
      if (problem !== undefined) return problem
      policy++
      operators = 0
      start = i + 1
    }
  }
  return tooBig(text.length)
}
