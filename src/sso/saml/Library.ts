/**
 * node-saml and xmldom, loaded with the first SAML operation rather than with the service: their
 * module graph (xml-crypto, xml-encryption, xpath, xml2js, xmlbuilder) is ~16 MB of an idle process
 * that may have no SAML connection (issue 37, measured in the binary). The service's entry points
 * wait for `samlLibrariesLoaded` before the synchronous parts (Metadata, Client) reach for them.
 */
import { Effect } from "effect"

interface Libraries {
  readonly saml: typeof import("@node-saml/node-saml")
  readonly xmldom: typeof import("@xmldom/xmldom")
}

let libraries: Libraries | undefined
let loading: Promise<void> | undefined

export const loadSamlLibraries = (): Promise<void> =>
  loading ??= Promise.all([import("@node-saml/node-saml"), import("@xmldom/xmldom")]).then(([saml, xmldom]) => {
    libraries = { saml, xmldom }
  })

export const samlLibrariesLoaded: Effect.Effect<void> = Effect.suspend(() =>
  libraries !== undefined ? Effect.void : Effect.promise(loadSamlLibraries))

/** the libraries, once loaded (every path into SAML work passes through the service, which loads them) */
export const samlLibraries = (): Libraries => {
  if (libraries === undefined) throw new Error("the SAML libraries are not loaded yet (samlLibrariesLoaded)")
  return libraries
}
