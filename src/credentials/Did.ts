/**
 * The service's DID document (decisions §18): `did:web` of PUBLIC_BASE_URL's host. Ed25519 credential
 * keys as `Multikey` methods (the current key, and each previous key while a credential it signed is
 * unexpired), the RSA grant-token keys as `JsonWebKey` methods, `assertionMethod` = the credential
 * keys, and the JWKS as a `JsonWebKeySet` service.
 */
import type { PublicJwk } from "../platform/Keys.ts"
import type { VcKeyService, VcPublicKey } from "./Keys.ts"

export const didDocument = (input: {
  readonly keys: VcKeyService
  /** credential keys to publish, current first */
  readonly credentialKeys: ReadonlyArray<VcPublicKey>
  readonly rsaKeys: ReadonlyArray<PublicJwk>
  readonly baseUrl: string
}) => {
  const did = input.keys.did
  const credentialMethods = input.credentialKeys.map((k) => ({
    id: `${did}#${k.kid}`,
    type: "Multikey",
    controller: did,
    publicKeyMultibase: k.multibase
  }))
  const rsaMethods = input.rsaKeys.map((k) => ({
    id: `${did}#${k.kid}`,
    type: "JsonWebKey",
    controller: did,
    publicKeyJwk: { kty: k.kty, n: k.n, e: k.e, alg: k.alg, kid: k.kid }
  }))
  return {
    "@context": ["https://www.w3.org/ns/did/v1", "https://w3id.org/security/multikey/v1", "https://w3id.org/security/jwk/v1"],
    id: did,
    verificationMethod: [...credentialMethods, ...rsaMethods],
    assertionMethod: credentialMethods.map((m) => m.id),
    service: [{ id: `${did}#jwks`, type: "JsonWebKeySet", serviceEndpoint: `${input.baseUrl}/.well-known/jwks.json` }]
  }
}

/** The JSON-LD context named by our credentials, so their terms are defined (VCDM 2.0 asks it). */
export const agentAuthContext = (baseUrl: string) => {
  const vocab = `${baseUrl}/ns/agent-auth/v1#`
  return {
    "@context": {
      "@protected": true,
      AgentGrantCredential: `${vocab}AgentGrantCredential`,
      FidoEvidence: { "@id": `${vocab}FidoEvidence`, "@context": { verifiedAt: { "@id": `${vocab}verifiedAt`, "@type": "http://www.w3.org/2001/XMLSchema#dateTime" } } },
      principalId: `${vocab}principalId`,
      grantId: `${vocab}grantId`,
      scopes: { "@id": `${vocab}scopes`, "@container": "@set" },
      delegationDepth: { "@id": `${vocab}delegationDepth`, "@type": "http://www.w3.org/2001/XMLSchema#integer" }
    }
  }
}

/** SD-JWT VC type metadata of `<PUBLIC_BASE_URL>/vct/agent-grant`, for wallets and verifiers that read it */
export const agentGrantTypeMetadata = (baseUrl: string) => ({
  vct: `${baseUrl}/vct/agent-grant`,
  name: "Agent grant",
  description: "A person's grant of scopes to a software agent, issued by agent-auth-service",
  claims: [
    { path: ["grantId"], sd: "never", display: [{ lang: "en", label: "Grant" }] },
    { path: ["principalId"], sd: "always", display: [{ lang: "en", label: "Person" }] },
    { path: ["scopes"], sd: "always", display: [{ lang: "en", label: "Scopes" }] },
    { path: ["delegationDepth"], sd: "always", display: [{ lang: "en", label: "Delegation depth" }] }
  ]
})
