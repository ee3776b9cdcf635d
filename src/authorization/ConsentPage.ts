/**
 * The consent page: server-rendered HTML a person reads and answers. No third-party assets; the
 * only script is our own passkey helper, loaded only when the developer requires a passkey.
 * Approve and Deny are plain form posts, so the page works without JavaScript.
 */
import { HttpServerResponse } from "@effect/platform"
import { randomBytes } from "node:crypto"
import { ASSERTION_HELPERS } from "../passkeys/BrowserScript.ts"
import type { ConsentView } from "./Service.ts"

export const escape = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;")

const STYLE = `
  :root { color-scheme: light dark; --fg: #1d2430; --muted: #5b6472; --bg: #f5f6f8; --card: #fff; --accent: #1f5fd6; --line: #d9dde3; }
  @media (prefers-color-scheme: dark) { :root { --fg: #e8eaee; --muted: #a4acb9; --bg: #14171c; --card: #1d2128; --accent: #6d9bff; --line: #343a44; } }
  * { box-sizing: border-box; }
  body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
  main { max-width: 34rem; margin: 3rem auto; padding: 2rem; background: var(--card); border: 1px solid var(--line); border-radius: 12px; }
  h1 { font-size: 1.35rem; margin: 0 0 .25rem; }
  .did { color: var(--muted); font-size: .85rem; word-break: break-all; margin: 0 0 1rem; }
  .desc { margin: 0 0 1rem; overflow-wrap: anywhere; }
  .facts { display: grid; grid-template-columns: max-content 1fr; gap: .35rem 1rem; margin: 0 0 1rem; padding: .75rem; border: 1px solid var(--line); border-radius: 8px; }
  .facts dt { color: var(--muted); }
  .facts dd { margin: 0; overflow-wrap: anywhere; }
  .muted { color: var(--muted); font-size: .9rem; }
  h1 { overflow-wrap: anywhere; }
  ul { padding: 0; list-style: none; margin: 1rem 0; }
  li { padding: .6rem .75rem; border: 1px solid var(--line); border-radius: 8px; margin-bottom: .5rem; }
  li strong { display: block; }
  li code { color: var(--muted); font-size: .8rem; overflow-wrap: anywhere; }
  li strong { overflow-wrap: anywhere; }
  .expiry { color: var(--muted); font-size: .9rem; }
  .actions { display: flex; gap: .75rem; margin-top: 1.5rem; flex-wrap: wrap; }
  button { font: inherit; min-height: 44px; padding: .6rem 1.2rem; border-radius: 8px; border: 1px solid var(--line); background: transparent; color: var(--fg); cursor: pointer; }
  button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
  .notice { padding: .75rem; border-radius: 8px; border: 1px solid var(--line); }
  #passkey-status { color: var(--muted); min-height: 1.5em; }
  #dpdp-notice { margin: 1rem 0; padding: .75rem; border: 1px solid var(--line); border-radius: 8px; overflow-wrap: anywhere; }
  #dpdp-notice h2 { font-size: 1.1rem; margin: 0 0 .25rem; }
  #dpdp-notice h3 { font-size: 1rem; margin: .75rem 0 .25rem; }
  #notice-content { white-space: pre-line; }
  #notice-languages a, #notice-languages strong { margin-right: .5rem; }
  a { color: var(--accent); }
  /* a phone: the card fills the width, the facts stack, the answers are full-width tap targets */
  @media (max-width: 30rem) {
    main { margin: 0; padding: 1.25rem 1rem 1.5rem; border-width: 0 0 1px; border-radius: 0; }
    .facts { grid-template-columns: 1fr; gap: 0; }
    .facts dd { margin-bottom: .5rem; }
    .facts dd:last-child { margin-bottom: 0; }
    .actions { flex-direction: column; }
    .actions form, .actions button { width: 100%; }
  }
`

export interface Page {
  readonly html: string
  readonly csp: string
}

/** a page of ours (the OAuth sign-in pages too): `scriptSrc` replaces the consent page's own passkey script */
export const page = (title: string, body: string, options: { script?: boolean; scriptSrc?: string; formTargets?: ReadonlyArray<string> } = {}): Page => {
  const nonce = randomBytes(16).toString("base64")
  const formAction = ["'self'", ...(options.formTargets ?? [])].join(" ")
  const csp = [
    "default-src 'none'",
    `style-src 'nonce-${nonce}'`,
    options.script ? "script-src 'self'" : "script-src 'none'",
    options.script ? "connect-src 'self'" : "",
    "img-src 'self' data:",
    `form-action ${formAction}`,
    "base-uri 'none'",
    "frame-ancestors 'none'"
  ].filter(Boolean).join("; ")
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escape(title)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
${options.script ? `<script src="${escape(options.scriptSrc ?? "/consent/passkey.js")}" defer></script>` : ""}
</body>
</html>`
  return { html, csp }
}

const originOf = (uri: string | null) => {
  if (uri === null) return []
  try {
    return [new URL(uri).origin]
  } catch {
    return []
  }
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
/** "24 Nov 2026, 10:05 UTC": the same text for everyone, whatever the server's locale */
const when = (ms: number) => {
  const d = new Date(ms)
  const hm = `${String(d.getUTCHours()).padStart(2, "0")}:${String(d.getUTCMinutes()).padStart(2, "0")}`
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${hm} UTC`
}

const lasting = (seconds: number) => {
  const days = Math.round(seconds / 86_400)
  if (days >= 2) return `${days} days`
  const hours = Math.round(seconds / 3600)
  return hours >= 2 ? `${hours} hours` : `${Math.max(1, Math.round(seconds / 60))} minutes`
}

const httpsHref = (url: string | null) => url !== null && /^https:\/\//.test(url) ? escape(url) : undefined

/**
 * decisions §21: the notice the request is pinned to, before Approve/Deny: its language variants,
 * the purposes asked for, the data items, how to withdraw (our /permissions page when the notice
 * names no other way), the grievance contact and the Board complaint link.
 */
const noticeSection = (view: ConsentView): string => {
  const n = view.notice
  if (n === null) return ""
  const languages = n.languages.length < 2 ? "" : `<p id="notice-languages">Read in: ${n.languages.map((l) =>
    l === n.language
      ? `<strong lang="${escape(l)}">${escape(l)}</strong>`
      : `<a href="/consent?req=${encodeURIComponent(view.id)}&amp;lang=${encodeURIComponent(l)}" hreflang="${escape(l)}" lang="${escape(l)}">${escape(l)}</a>`
  ).join("")}</p>`
  const purposes = n.purposes.map((p) =>
    `<li><strong>${escape(p.name ?? p.code)}</strong>${escape(p.description)}</li>`).join("\n")
  const withdrawal = httpsHref(n.withdrawalUrl) ?? "/permissions"
  const officer = n.grievanceOfficer
  const grievance = officer !== null
    ? `${escape(officer.name)}, <a href="mailto:${escape(officer.email)}">${escape(officer.email)}</a>${officer.phone ? `, ${escape(officer.phone)}` : ""}`
    : n.dataFiduciaryContact !== null ? escape(n.dataFiduciaryContact) : undefined
  const rights = httpsHref(n.rightsUrl)
  const board = httpsHref(n.boardComplaintUrl)
  return `<section id="dpdp-notice" lang="${escape(n.language)}" aria-labelledby="notice-title">
<h2 id="notice-title">${escape(n.title)}</h2>
<p class="muted" id="notice-version">Notice ${escape(n.noticeId)}, version ${escape(n.version)}</p>
${languages}
<div id="notice-content">${escape(n.content)}</div>
<h3>What it is for</h3>
<ul id="notice-purposes">
${purposes}
</ul>
${n.dataItems.length > 0 ? `<h3>Information used</h3><p id="notice-data-items">${n.dataItems.map(escape).join(", ")}</p>` : ""}
<p id="notice-withdrawal">You can withdraw this consent at any time, as easily as you give it: <a href="${withdrawal}">withdraw consent</a>.</p>
${rights ? `<p id="notice-rights"><a href="${rights}">Your rights over your data</a></p>` : ""}
${grievance ? `<p id="notice-grievance">Questions or complaints: ${grievance}</p>` : ""}
${board ? `<p id="notice-board">You may also complain to the Data Protection Board of India: <a href="${board}">make a complaint</a></p>` : ""}
</section>`
}

export interface ConsentPageOptions {
  /** the clock's now: "until when" is counted from it */
  readonly nowMs: number
  /** who answers: the signed-in identity (SSO) when there is one, else the request's principal */
  readonly signedInAs?: { readonly principalId: string; readonly connectionName: string }
  /** a line above the scopes (what the person's groups allow) */
  readonly notice?: string
}

/**
 * Who asks (the developer's account and the agent, with its description), for whom (the principal,
 * or the identity signed in through SSO), what (each scope with its meaning when the service knows
 * one, else the scope itself) and until when. Everything the developer or a caller chose is escaped.
 */
export const consentPage = (view: ConsentView, options: ConsentPageOptions): Page => {
  const scopes = view.scopes
    .map((s) => {
      const meaning = view.scopeDescriptions[s]
      return meaning !== undefined && meaning !== s
        ? `<li><strong>${escape(meaning)}</strong><code>${escape(s)}</code></li>`
        : `<li><strong class="raw">${escape(s)}</strong></li>`
    })
    .join("\n")
  const forWhom = options.signedInAs
    ? `${escape(options.signedInAs.principalId)} <span class="muted">(signed in with ${escape(options.signedInAs.connectionName)})</span>`
    : escape(view.principalId)
  const until = options.nowMs + view.grantTtlSeconds * 1000
  // decisions §22.5: an OAuth client is named with its verification and host, the redirect host always, and the resource
  const oauth = view.oauth
  const oauthFacts = oauth === null ? "" : `
  <dt>Application</dt><dd id="client">${escape(oauth.clientName)}${oauth.verified ? "" : ` <strong id="client-unverified">(unverified)</strong>`}${
    oauth.clientHost ? ` <span class="muted" id="client-host">${escape(oauth.clientHost)}</span>` : ""}</dd>
  <dt>Sends you back to</dt><dd id="redirect-host">${escape(oauth.redirectHost)}${
    oauth.redirectWarning ? ` <span class="muted" id="redirect-warning">(an application on this device: approve only if you started this)</span>` : ""}</dd>
  <dt>Access to</dt><dd id="resource">${escape(oauth.resourceName)} <span class="muted" id="resource-identifier">${escape(oauth.resource)}</span></dd>`
  const passkey = view.fidoRequired
    ? `<p class="notice">This service asks you to confirm with a passkey.</p>
<div class="actions">
  <button class="primary" type="button" id="passkey-approve" data-request="${escape(view.id)}">Approve with passkey</button>
  <form method="post" action="/consent/deny"><input type="hidden" name="req" value="${escape(view.id)}"><button type="submit" id="deny">Deny</button></form>
</div>
<p id="passkey-status" role="status"></p>`
    : `<div class="actions">
  <form method="post" action="/consent/approve"><input type="hidden" name="req" value="${escape(view.id)}">${
    view.notice === null ? "" : `<input type="hidden" name="lang" value="${escape(view.notice.language)}">`}<button class="primary" type="submit" id="approve">Approve</button></form>
  <form method="post" action="/consent/deny"><input type="hidden" name="req" value="${escape(view.id)}"><button type="submit" id="deny">Deny</button></form>
</div>`
  return page(
    `Allow ${view.agentName}?`,
    `<h1>Allow <span id="agent-name">${escape(view.agentName)}</span> to act for you?</h1>
<p class="did" id="agent-did">${escape(view.agentDid)}</p>
${view.agentDescription ? `<p class="desc" id="agent-description">${escape(view.agentDescription)}</p>` : ""}
<dl class="facts">
  <dt>Asked by</dt><dd id="developer-name">${escape(view.developerName)}</dd>
  <dt>For</dt><dd id="for-whom">${forWhom}</dd>
  <dt>Access until</dt><dd id="grant-until">${escape(when(until))} <span class="muted">(${escape(lasting(view.grantTtlSeconds))} after you approve)</span></dd>${oauthFacts}
</dl>
${options.notice ? `<p class="notice" id="sso-notice">${escape(options.notice)}</p>` : ""}
<p>It is asking to:</p>
<ul id="scopes">
${scopes}
</ul>
${noticeSection(view)}
<p class="expiry" id="request-expiry">Answer before ${escape(when(Date.parse(view.expiresAt)))}; after that the request expires.</p>
${passkey}`,
    { script: view.fidoRequired, formTargets: originOf(view.redirectUri) }
  )
}

const NO_STORE = { "cache-control": "no-store", "referrer-policy": "no-referrer" }

/** A page as the answer: its CSP, no framing, no caching (the consent and SSO routes) */
export const htmlResponse = (p: Page, status = 200, headers: Record<string, string> = {}) =>
  HttpServerResponse.text(p.html, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: { "content-security-policy": p.csp, "x-content-type-options": "nosniff", "x-frame-options": "DENY", ...NO_STORE, ...headers }
  })

export const seeOther = (location: string, headers: Record<string, string> = {}) =>
  HttpServerResponse.empty({ status: 303, headers: { location, ...NO_STORE, ...headers } })

export const messagePage = (title: string, message: string, links: ReadonlyArray<{ readonly text: string; readonly href: string }> = []): Page =>
  page(title, `<h1>${escape(title)}</h1><p class="notice" id="message">${escape(message)}</p>${
    links.length === 0 ? "" : `<ul id="links">${links.map((l) => `<li><a href="${escape(l.href)}">${escape(l.text)}</a></li>`).join("")}</ul>`
  }`)

/** A same-origin passkey helper: options → navigator.credentials.get → verify → redirect. */
export const PASSKEY_SCRIPT = `(() => {
  const button = document.getElementById("passkey-approve");
  const status = document.getElementById("passkey-status");
  if (!button) return;
${ASSERTION_HELPERS}
  const post = (path, body) => fetch(path, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })
    .then(async (r) => { const j = await r.json(); if (!r.ok) throw Object.assign(new Error(j.message || "failed"), { code: j.code }); return j; });
  button.addEventListener("click", async () => {
    button.disabled = true;
    status.textContent = "Waiting for your passkey...";
    try {
      const authRequestId = button.dataset.request;
      const base = "/v1/consent/" + encodeURIComponent(authRequestId) + "/passkey/";
      const { challengeId, publicKey } = await post(base + "options", {});
      const cred = await navigator.credentials.get({ publicKey: requestOptions(publicKey) });
      const response = assertionJson(cred);
      // a passkey the service no longer knows (deleted): tell the password manager (WebAuthn Signal API, decisions §17)
      const result = await post(base + "verify", { challengeId, response }).catch((e) => {
        if (e.code === "UNKNOWN_CREDENTIAL" && PublicKeyCredential.signalUnknownCredential) {
          PublicKeyCredential.signalUnknownCredential({ rpId: publicKey.rpId, credentialId: cred.id }).catch(() => {});
        }
        throw e;
      });
      if (result.location) window.location.assign(result.location);
      else status.textContent = "Approved. You can close this page.";
    } catch (e) {
      status.textContent = "Passkey approval failed: " + e.message;
      button.disabled = false;
    }
  });
})();
`
