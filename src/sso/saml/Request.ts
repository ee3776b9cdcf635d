/**
 * The AuthnRequest, sent with the HTTP-Redirect binding (deflated, base64, in the IdP's SSO URL):
 * our entity id as Issuer, our ACS as AssertionConsumerServiceURL (HTTP-POST), the IdP's SSO URL as
 * Destination, and RelayState = the login state. Its ID is stored with the state, and the Response
 * must answer that ID (InResponseTo).
 */
import { newRequestId, samlClient } from "./Client.ts"
import type { SamlSettings, ServiceProvider } from "./Metadata.ts"

export const authnRequestUrl = async (
  settings: SamlSettings,
  sp: ServiceProvider,
  o: { readonly relayState: string; readonly requestId?: string }
): Promise<{ readonly url: string; readonly requestId: string }> => {
  const requestId = o.requestId ?? newRequestId()
  const client = samlClient(settings, sp, { certificates: settings.idpCertificates, requestId })
  const url = await client.getAuthorizeUrlAsync(o.relayState, undefined, {})
  return { url, requestId }
}
