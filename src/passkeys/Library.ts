/**
 * @simplewebauthn/server, loaded with the first passkey operation rather than with the service: its
 * module graph (CBOR, ASN.1, X.509) is ~14 MB of an idle process that may never see a passkey
 * (issue 37, measured in the binary). Every use is already asynchronous.
 */
let loading: Promise<typeof import("@simplewebauthn/server")> | undefined
let loadingHelpers: Promise<typeof import("@simplewebauthn/server/helpers")> | undefined

export const webauthn = () => loading ??= import("@simplewebauthn/server")
export const webauthnHelpers = () => loadingHelpers ??= import("@simplewebauthn/server/helpers")
