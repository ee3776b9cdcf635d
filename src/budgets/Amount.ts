/**
 * Money amounts: JSON numbers on the wire, numeric(20,4) in SQL, never float arithmetic.
 *
 * An incoming number is accepted only when its shortest decimal form (what JSON.stringify writes)
 * has at most 4 decimals and at most 11 integer digits: then that text is exactly the decimal the
 * client meant, it goes to PostgreSQL as text, and every sum is done there (or on scaled BigInts).
 * At most 15 significant digits means every stored value converts back to the same JSON number.
 */

/** largest accepted amount: 11 integer digits and 4 decimals (15 significant digits) */
export const MAX_AMOUNT = 99_999_999_999.9999

/** undefined when the number is an acceptable positive amount; else the reason */
export const amountProblem = (n: number): string | undefined => {
  if (typeof n !== "number" || !Number.isFinite(n)) return "must be a finite number"
  if (n <= 0) return "must be positive"
  if (n > MAX_AMOUNT) return `must be at most ${MAX_AMOUNT}`
  const text = String(n)
  if (!/^\d+(\.\d{1,4})?$/.test(text)) return "must have at most 4 decimal places"
  return undefined
}

/** the exact decimal text of an accepted amount (e.g. 0.1 → "0.1") */
export const amountText = (n: number): string => String(n)

const SCALE = 4

/** "12.3400" → 123400n (units of 1/10000) */
export const toUnits = (decimal: string | number): bigint => {
  const text = typeof decimal === "number" ? String(decimal) : decimal.trim()
  const match = /^(-)?(\d+)(?:\.(\d+))?$/.exec(text)
  if (match === null) throw new Error(`not a decimal: ${text}`)
  const fraction = (match[3] ?? "").padEnd(SCALE, "0")
  if (fraction.length > SCALE && /[1-9]/.test(fraction.slice(SCALE))) throw new Error(`too many decimals: ${text}`)
  const units = BigInt(match[2]!) * 10n ** BigInt(SCALE) + BigInt(fraction.slice(0, SCALE))
  return match[1] ? -units : units
}

/** numeric text from PostgreSQL ("12.3400") → the JSON number 12.34 */
export const toNumber = (decimal: string | number): number => Number(decimal)
