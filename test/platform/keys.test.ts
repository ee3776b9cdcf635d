/**
 * Grant-token verification (decisions §3): RS256 only, issuer and expiry checked with 60 s leeway,
 * the required claims present, previous keys still accepted. Verified tokens are remembered by
 * their text, so the time checks are asserted again on a remembered token.
 */
import { describe, expect, test } from "bun:test"
import { Effect, Either } from "effect"
import { createPrivateKey, createPublicKey, sign as cryptoSign } from "node:crypto"
import { generateRsaPrivateKeyPem, makeKeys } from "../../src/platform/Keys.ts"

const issuer = "https://issuer.test"
const oldPem = generateRsaPrivateKeyPem()
const currentPem = generateRsaPrivateKeyPem()
const now = 1_800_000_000
const claims = { sub: "p", agt: "agt_1", dev: "dev_1", scp: ["email:read"], jti: "jti_1", grnt: "grt_1", iat: now, exp: now + 600 }

const b64 = (value: unknown) => Buffer.from(typeof value === "string" ? value : JSON.stringify(value)).toString("base64url")
/** signs any header and payload with an RSA key, so each rule is tested on its own */
const forge = (pem: string, header: Record<string, unknown>, payload: Record<string, unknown>) => {
  const input = `${b64(header)}.${b64(payload)}`
  return `${input}.${cryptoSign("sha256", Buffer.from(input), createPrivateKey(pem)).toString("base64url")}`
}

const setup = async () => {
  const keys = await makeKeys({ privateKeyPem: currentPem, previousPublicKeys: [createPublicKey(oldPem).export({ type: "spki", format: "pem" }).toString()], issuer })
  const oldKid = keys.jwks.keys.find((k) => k.kid !== keys.kid)!.kid
  const verify = (token: string, at = now) => Effect.runSync(Effect.either(keys.verify(token, at)))
  return { keys, oldKid, verify }
}

describe("Keys.verify", () => {
  test("a signed token verifies, and again from memory; expiry is checked on every call with 60 s leeway", async () => {
    const { keys, verify } = await setup()
    const token = await Effect.runPromise(keys.sign(claims))
    const first = verify(token)
    expect(Either.isRight(first) && first.right).toMatchObject({ ...claims, iss: issuer })
    expect(Either.isRight(verify(token, now + 600 + 59))).toBe(true)
    const expired = verify(token, now + 600 + 60)
    expect(Either.isLeft(expired) && expired.left.reason).toBe("expired")
  })

  test("a token signed with a previous key (listed in the JWKS) still verifies; an unknown kid does not", async () => {
    const { verify, oldKid } = await setup()
    expect(Either.isRight(verify(forge(oldPem, { alg: "RS256", kid: oldKid }, { ...claims, iss: issuer })))).toBe(true)
    const unknown = verify(forge(oldPem, { alg: "RS256", kid: "nope" }, { ...claims, iss: issuer }))
    expect(Either.isLeft(unknown) && unknown.left.reason).toBe("unknown kid")
    // the old key signing under the current kid is a bad signature
    const { keys } = await setup()
    const wrong = verify(forge(oldPem, { alg: "RS256", kid: keys.kid }, { ...claims, iss: issuer }))
    expect(Either.isLeft(wrong) && wrong.left.reason).toBe("bad signature")
  })

  test("each rule refuses on its own", async () => {
    const { keys, verify } = await setup()
    const header = { alg: "RS256", kid: keys.kid }
    const payload = { ...claims, iss: issuer }
    const reason = (token: string, at = now) => {
      const r = verify(token, at)
      return Either.isLeft(r) ? r.left.reason : "accepted"
    }
    expect(reason(forge(currentPem, header, payload))).toBe("accepted")
    expect(reason(forge(currentPem, { ...header, alg: "RS512" }, payload))).toBe("alg not allowed")
    expect(reason(`${b64({ alg: "none" })}.${b64(payload)}.`)).toBe("alg not allowed")
    expect(reason(forge(currentPem, { ...header, crit: ["exp"] }, payload))).toBe("unsupported header parameter")
    expect(reason(forge(currentPem, { ...header, b64: false }, payload))).toBe("unsupported header parameter")
    expect(reason(forge(currentPem, header, { ...payload, iss: "https://elsewhere" }))).toBe("unexpected iss")
    expect(reason(forge(currentPem, header, { ...payload, exp: undefined }))).toBe("missing exp")
    expect(reason(forge(currentPem, header, { ...payload, exp: "soon" }))).toBe("missing exp")
    for (const claim of ["sub", "dev", "scp", "jti", "grnt"]) {
      expect(reason(forge(currentPem, header, { ...payload, [claim]: undefined }))).toBe(`missing ${claim}`)
    }
    expect(reason(forge(currentPem, header, { ...payload, scp: ["a", 1] }))).toBe("bad scp")
    expect(reason(forge(currentPem, header, { ...payload, nbf: now + 61 }))).toBe("not yet valid")
    expect(reason(forge(currentPem, header, { ...payload, nbf: now + 60 }))).toBe("accepted")
    expect(reason("a.b")).toBe("not a compact JWS")
    expect(reason(`${b64(header)}.${b64(payload)}.***`)).toBe("bad base64url")
    // a payload changed after signing
    const good = forge(currentPem, header, payload)
    const [h, , sig] = good.split(".")
    expect(reason(`${h}.${b64({ ...payload, scp: ["admin"] })}.${sig}`)).toBe("bad signature")
    // HS256 keyed with the public key's JWK text is an alg the verifier never accepts
    expect(reason(`${b64({ alg: "HS256", kid: keys.kid })}.${b64(payload)}.${sig}`)).toBe("alg not allowed")
  })
})
