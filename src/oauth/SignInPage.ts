/**
 * The passkey step of the OAuth sign-in (decisions §22.5): a page of ours (the consent page's CSP:
 * only our own script, fetches to our own origin) with one button, and the script that asks the
 * browser for a passkey (no allowCredentials when usernameless) and goes where the service says.
 */
import { escape, type Page } from "../authorization/ConsentPage.ts"
import { ASSERTION_HELPERS } from "../passkeys/BrowserScript.ts"

type PageFn = (title: string, body: string, options: { script?: boolean; scriptSrc?: string }) => Page

export const passkeyPage = (
  page: PageFn,
  input: { readonly issuer: string; readonly ix: string; readonly clientName: string; readonly secondFactor: boolean }
): Page => {
  const path = new URL(input.issuer).pathname
  return page(
    "Sign in with a passkey",
    `<h1>${input.secondFactor ? "Confirm with your passkey" : "Sign in with a passkey"}</h1>
<p class="notice" id="message">${
      input.secondFactor
        ? "This service asks you to confirm it is you with a passkey."
        : `Use your passkey to continue to ${escape(input.clientName)}.`
    }</p>
<div class="actions">
  <button class="primary" type="button" id="passkey-signin" data-ix="${escape(input.ix)}" data-base="${escape(path)}/login/passkey/">Use passkey</button>
</div>
<p id="passkey-status" role="status"></p>`,
    { script: true, scriptSrc: `${path}/login/passkey.js` }
  )
}

/** options → navigator.credentials.get → verify → the location the service answers */
export const SIGN_IN_PASSKEY_SCRIPT = `(() => {
  const button = document.getElementById("passkey-signin");
  const status = document.getElementById("passkey-status");
  if (!button) return;
${ASSERTION_HELPERS}
  const post = (path, body) => fetch(button.dataset.base + path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    .then(async (r) => { const j = await r.json(); if (!r.ok) throw Object.assign(new Error(j.error_description || j.error || "failed"), { reason: j.error }); return j; });
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = "Waiting for your passkey...";
    try {
      const ix = button.dataset.ix;
      const { challengeId, publicKey } = await post("options", { ix });
      const cred = await navigator.credentials.get({ publicKey: requestOptions(publicKey) });
      const response = assertionJson(cred);
      const result = await post("verify", { ix, challengeId, response }).catch((e) => {
        if (e.reason === "unknown_credential" && PublicKeyCredential.signalUnknownCredential) {
          PublicKeyCredential.signalUnknownCredential({ rpId: publicKey.rpId, credentialId: cred.id }).catch(() => {});
        }
        throw e;
      });
      window.location.assign(result.location);
    } catch (e) {
      status.textContent = "Passkey sign-in failed: " + e.message;
      button.disabled = false;
    }
  });
})();
`
