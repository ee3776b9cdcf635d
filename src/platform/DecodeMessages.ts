/**
 * Schema decode issues in plain words. The platform's messages name our schemas ("Expected { readonly
 * name: minLength(1) & maxLength(200); … }, actual …") and echo the value sent, which may be a secret;
 * a client needs the field and what it must be. One message per field: the alternatives of an
 * optional or nullable field ("Expected undefined", "Expected null") are dropped when the field has a
 * real problem, and the literals of a choice are merged into "must be one of …".
 */

export interface DecodeIssue {
  readonly path: ReadonlyArray<string | number>
  readonly message: string
}

export interface PlainIssue {
  readonly path: string
  readonly message: string
}

const EXPECTED = /^Expected ([\s\S]*), actual [\s\S]*$/
const LITERAL = /^"((?:[^"\\]|\\.)*)"$|^-?\d+(\.\d+)?$|^true$|^false$/

const plural = (n: string, word: string) => `${n} ${word}${n === "1" ? "" : "s"}`

/** a refinement named by its filter (e.g. "maxLength(200)") tells the base type */
const REFINED_STRING = /^(minLength|maxLength|length|pattern|nonEmptyString|trimmed|startsWith|endsWith|includes|lowercased|uppercased)\(/
const REFINED_ARRAY = /^(minItems|maxItems|itemsCount)\(/
const REFINED_NUMBER = /^(int|finite|positive|negative|nonNegative|nonPositive|greaterThan|greaterThanOrEqualTo|lessThan|lessThanOrEqualTo|between|multipleOf)\(/

/** What a value must be, from the "Expected X" of a type issue; undefined for an optional's alternative. */
const mustBe = (expected: string, atRoot: boolean): string | undefined => {
  const x = expected.trim()
  if (x === "undefined" || x === "null") return undefined
  if (x === "string") return "must be a string"
  if (x === "number") return "must be a number"
  if (x === "boolean") return "must be true or false"
  if (x === "unknown" || x === "any") return "is not valid"
  let m = /^a string at least (\d+) character\(s\) long$/.exec(x)
  if (m) return m[1] === "1" ? "must not be empty" : `must be at least ${plural(m[1]!, "character")} long`
  m = /^a string at most (\d+) character\(s\) long$/.exec(x)
  if (m) return `must be at most ${plural(m[1]!, "character")} long`
  m = /^an array of at most (\d+) item\(s\)$/.exec(x)
  if (m) return `must have at most ${plural(m[1]!, "item")}`
  m = /^an array of at least (\d+) item\(s\)$/.exec(x)
  if (m) return m[1] === "1" ? "must not be empty" : `must have at least ${plural(m[1]!, "item")}`
  if (/^a string matching the pattern/.test(x)) return "has an invalid format"
  if (x.startsWith("{")) return atRoot ? "the body must be a JSON object" : "must be an object"
  if (/^(ReadonlyArray<|Array<|readonly \[|\[)/.test(x)) return "must be an array"
  const first = x.split(" & ")[0]!
  if (REFINED_STRING.test(first)) return "must be a string"
  if (REFINED_ARRAY.test(first)) return "must be an array"
  if (REFINED_NUMBER.test(first)) return "must be a number"
  // "an integer", "a finite number", "a valid date": already words
  if (/^an? [a-z][a-z ]*$/.test(x)) return `must be ${x}`
  return "is not valid"
}

/** The issues of one request, one plain message per field, in the order the fields first appear. */
export const plainIssues = (issues: ReadonlyArray<DecodeIssue>): Array<PlainIssue> => {
  const byPath = new Map<string, { literals: Array<string>; messages: Array<string> }>()
  for (const issue of issues) {
    const path = issue.path.join(".")
    const entry = byPath.get(path) ?? { literals: [], messages: [] }
    byPath.set(path, entry)
    const expected = EXPECTED.exec(issue.message)
    if (expected === null) {
      // a message of ours (a refinement's) or the platform's plain ones ("is missing", "is unexpected")
      const text = issue.message === "is missing" ? "is required" : issue.message
      if (!entry.messages.includes(text)) entry.messages.push(text)
      continue
    }
    const x = expected[1]!.trim()
    if (LITERAL.test(x)) {
      entry.literals.push(x)
      continue
    }
    const text = mustBe(x, path === "")
    if (text !== undefined && !entry.messages.includes(text)) entry.messages.push(text)
  }
  const out: Array<PlainIssue> = []
  for (const [path, entry] of byPath) {
    const messages = [...entry.messages]
    if (entry.literals.length > 0) {
      messages.unshift(entry.literals.length === 1 ? `must be ${entry.literals[0]}` : `must be one of ${entry.literals.join(", ")}`)
    }
    if (messages.length > 0) out.push({ path, message: messages[0]! })
  }
  // only "not undefined / not null" alternatives: noise beside a field's real problem (an optional
  // array whose item failed), else the value itself is wrong (e.g. `null` where a value is required)
  if (out.length === 0) for (const path of byPath.keys()) out.push({ path, message: "is not valid" })
  return out
}
