/**
 * What both passkey pages' scripts (the consent page's and the OAuth sign-in's) do in the browser
 * before and after `navigator.credentials.get`: base64url to and from buffers, the options'
 * challenge and credential ids as buffers, the assertion as the JSON the service verifies. Text,
 * spliced into each script, which is served from our own origin (the pages' CSP allows only that).
 */
export const ASSERTION_HELPERS = `
  const b64uToBuf = (s) => Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(s.length / 4) * 4, "=")), (c) => c.charCodeAt(0)).buffer;
  const bufToB64u = (b) => btoa(String.fromCharCode(...new Uint8Array(b))).replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const requestOptions = (publicKey) => {
    publicKey.challenge = b64uToBuf(publicKey.challenge);
    (publicKey.allowCredentials || []).forEach((c) => { c.id = b64uToBuf(c.id); });
    return publicKey;
  };
  const assertionJson = (cred) => ({
    id: cred.id, rawId: bufToB64u(cred.rawId), type: cred.type,
    response: {
      clientDataJSON: bufToB64u(cred.response.clientDataJSON),
      authenticatorData: bufToB64u(cred.response.authenticatorData),
      signature: bufToB64u(cred.response.signature),
      userHandle: cred.response.userHandle ? bufToB64u(cred.response.userHandle) : undefined
    },
    clientExtensionResults: {},
    authenticatorAttachment: cred.authenticatorAttachment || undefined
  });`
