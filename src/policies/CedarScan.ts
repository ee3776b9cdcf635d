/**
 * The linear pre-scan of Cedar text before the engine sees it (decisions §19, revised): at most
 * MAX_NESTING levels of `(`, `[` and `{` and MAX_POLICY_BYTES per policy. cedar-wasm parses by
 * recursion on a fixed wasm stack: ~150 nested brackets (0.5 KiB of text) overflow it.
 *
 * Brackets are counted outside string literals ("...", backslash escapes) and comments (`//` to
 * the end of the line). A policy ends at a `;` outside brackets; text after the last `;` counts as
 * one more. Anything else malformed (an unclosed string, a stray `)`) is left to the engine.
 */
export const MAX_NESTING = 32
export const MAX_POLICY_BYTES = 64 * 1024

export type ScanProblem = { readonly path: string; readonly message: string }

const OPEN = new Set(["(", "[", "{"])
const CLOSE = new Set([")", "]", "}"])

export const scanCedar = (text: string): ScanProblem | undefined => {
  let depth = 0
  let policy = 0
  let start = 0
  const tooBig = (end: number) =>
    Buffer.byteLength(text.slice(start, end)) > MAX_POLICY_BYTES
      ? { path: "content", message: `policy ${policy + 1} of the set is over ${MAX_POLICY_BYTES} bytes (at most ${MAX_POLICY_BYTES / 1024} KiB per policy)` }
      : undefined
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!
    if (c === '"') {
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
      start = i + 1
    }
  }
  return tooBig(text.length)
}
