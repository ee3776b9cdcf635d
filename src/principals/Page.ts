/**
 * The permissions page (decisions §12): server-rendered HTML where a person sees which agents may
 * act for them, with what scopes, since when, how it was approved and until when, and revokes any of
 * it (a form post, then a confirmation). Same rules as the consent page: no third-party assets, a
 * CSP with a per-response style nonce, our own same-origin script only, readable on a phone.
 */
import { randomBytes } from "node:crypto"
import type { PrincipalGrant } from "./Service.ts"

const escape = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;")

const STYLE = `
  :root { color-scheme: light dark; --fg: #1d2430; --muted: #5b6472; --bg: #f5f6f8; --card: #fff; --accent: #1f5fd6; --danger: #b42318; --line: #d9dde3; }
  @media (prefers-color-scheme: dark) { :root { --fg: #e8eaee; --muted: #a4acb9; --bg: #14171c; --card: #1d2128; --accent: #6d9bff; --danger: #ff7b6e; --line: #343a44; } }
  * { box-sizing: border-box; }
  body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
  main { max-width: 44rem; margin: 2rem auto; padding: 0 1rem; }
  h1 { font-size: 1.4rem; margin: 0 0 .25rem; }
  h2 { font-size: 1.15rem; margin: 0; }
  .lead, .meta, .did { color: var(--muted); }
  .did { font-size: .8rem; word-break: break-all; margin: 0 0 .5rem; }
  .card { background: var(--card); border: 1px solid var(--line); border-radius: 12px; padding: 1rem 1.25rem; margin: 1rem 0; }
  .child { border-left: 3px solid var(--line); margin: .75rem 0 0; padding: .25rem 0 .25rem .75rem; }
  ul { padding: 0; list-style: none; margin: .5rem 0; }
  li { padding: .15rem 0; }
  li code { color: var(--muted); font-size: .8rem; margin-left: .35rem; overflow-wrap: anywhere; }
  .meta { font-size: .9rem; margin: .25rem 0; }
  .notice { padding: .75rem 1rem; border-radius: 8px; border: 1px solid var(--line); background: var(--card); }
  form.rename { display: flex; gap: .5rem; flex-wrap: wrap; margin: .5rem 0 0; }
  form.rename input { font: inherit; flex: 1 1 10rem; min-height: 44px; padding: .4rem .6rem; border-radius: 8px; border: 1px solid var(--line); background: transparent; color: var(--fg); }
  .actions { display: flex; gap: .75rem; margin-top: .75rem; flex-wrap: wrap; }
  button { font: inherit; min-height: 44px; padding: .5rem 1.1rem; border-radius: 8px; border: 1px solid var(--line); background: transparent; color: var(--fg); cursor: pointer; }
  button.danger { border-color: var(--danger); color: var(--danger); }
  button.primary-danger { background: var(--danger); border-color: var(--danger); color: #fff; }
  @media (max-width: 30rem) { main { margin: 1rem auto; } .card { padding: .9rem; } .actions form, .actions button { width: 100%; } }
`

export interface Page {
  readonly html: string
  readonly csp: string
}

const shell = (title: string, body: string, script: boolean): Page => {
  const nonce = randomBytes(16).toString("base64")
  const csp = [
    "default-src 'none'",
    `style-src 'nonce-${nonce}'`,
    script ? "script-src 'self'" : "script-src 'none'",
    "img-src 'self' data:",
    "form-action 'self'",
    "base-uri 'none'",
    "frame-ancestors 'none'"
  ].join("; ")
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex">
<title>${escape(title)}</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
${script ? '<script src="/permissions/app.js" defer></script>' : ""}
</body>
</html>`
  return { html, csp }
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
/** "24 Nov 2026, 10:05 UTC": the same text for everyone, whatever the server's locale */
export const when = (iso: string) => {
  const d = new Date(iso)
  const hh = String(d.getUTCHours()).padStart(2, "0")
  const mm = String(d.getUTCMinutes()).padStart(2, "0")
  return `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${hh}:${mm} UTC`
}

const HOW: Record<PrincipalGrant["approvalMethod"], string> = {
  consent: "approved by you on the consent page",
  passkey: "approved by you with a passkey",
  sso: "approved by you after signing in with your organisation",
  policy: "approved automatically by your organisation's policy",
  developer: "granted by the application",
  sandbox: "approved automatically (sandbox)"
}

const hidden = (name: string, value: string) => `<input type="hidden" name="${name}" value="${escape(value)}">`

/** The first page: its script moves the token from the fragment into a form post. */
export const bootPage = (): Page =>
  shell(
    "Your permissions",
    `<h1>Agents acting for you</h1>
<form id="boot" method="post" action="/permissions/view">${hidden("session", "")}</form>
<p class="notice" id="boot-status" role="status">Opening your permissions…</p>
<noscript>
<p class="notice">Paste the access code from your link (the text after <code>#session=</code>):</p>
<form method="post" action="/permissions/view"><input name="session" aria-label="Access code" autocomplete="off" required>
<div class="actions"><button type="submit">Open</button></div></form>
</noscript>`,
    true
  )

export const messagePage = (title: string, message: string): Page =>
  shell(title, `<h1>${escape(title)}</h1><p class="notice" id="message">${escape(message)}</p>`, false)

export interface PasskeySummary {
  readonly id: string
  readonly deviceName: string | null
  readonly providerName: string | null
  readonly backedUp: boolean
  readonly createdAt: string
  readonly lastUsedAt: string | null
}

export interface SignalData {
  readonly rpId: string
  readonly userId: string
  readonly allAcceptedCredentialIds: ReadonlyArray<string>
  readonly name: string
  readonly displayName: string
}

const passkeyName = (p: PasskeySummary) => p.deviceName ?? p.providerName ?? "Passkey"

/** "Remove this passkey?": the second step of a removal */
export const removePasskeyPage = (session: string, passkey: PasskeySummary): Page =>
  shell(
    "Remove this passkey?",
    `<h1>Remove <span id="passkey-name">${escape(passkeyName(passkey))}</span>?</h1>
<p>You will no longer be able to approve requests with it. Your password manager is told to forget it.</p>
<div class="actions">
<form method="post" action="/permissions/passkeys/remove/confirm">${hidden("session", session)}${hidden("passkeyId", passkey.id)}<button class="primary-danger" type="submit" id="confirm">Remove passkey</button></form>
<form method="post" action="/permissions/view">${hidden("session", session)}<button type="submit" id="cancel">Cancel</button></form>
</div>`,
    false
  )

const scopeList = (g: PrincipalGrant) =>
  `<ul class="scopes">${g.scopes.map((s) => `<li>${escape(g.scopeDescriptions[s] ?? s)}<code>${escape(s)}</code></li>`).join("")}</ul>`

const revokeButton = (session: string, g: PrincipalGrant) =>
  `<form method="post" action="/permissions/revoke">${hidden("session", session)}${hidden("grantId", g.grantId)}<button class="danger" type="submit" data-grant="${escape(g.grantId)}">Revoke access for ${escape(g.agentName)}</button></form>`

/** an OAuth grant: the client (unverified when it registered itself) and the resource it reaches */
const oauthLine = (g: PrincipalGrant) =>
  g.oauth === undefined ? "" : `<p class="meta resource">${g.oauth.clientOrigin === "api" ? "" : `<span class="unverified">Unverified application. </span>`}On <strong class="resource-name">${escape(g.oauth.resourceName)}</strong> <code class="resource-id">${escape(g.oauth.resource)}</code></p>`

const grantBody = (g: PrincipalGrant, parentName: string | undefined) =>
  `<h2 class="agent-name">${escape(g.oauth?.clientName ?? g.agentName)}</h2>
<p class="did">${escape(g.agentDid)}</p>
${oauthLine(g)}
${scopeList(g)}
<p class="meta granted">Since ${escape(when(g.issuedAt))}, ${parentName === undefined ? escape(HOW[g.approvalMethod]) : `delegated by ${escape(parentName)}`}</p>
<p class="meta expires">Until ${escape(when(g.expiresAt))}</p>
${g.agentStatus === "suspended" ? `<p class="meta paused">Paused by the application for now; it may resume unless you revoke it.</p>` : ""}`

export const permissionsPage = (input: {
  readonly session: string
  readonly principalId: string
  readonly sessionExpiresAt: string
  readonly grants: ReadonlyArray<PrincipalGrant>
  readonly more: boolean
  readonly passkeys: ReadonlyArray<PasskeySummary>
  readonly signal: SignalData | undefined
  readonly notice?: string
}): Page => {
  const byId = new Map(input.grants.map((g) => [g.grantId, g]))
  const children = new Map<string, Array<PrincipalGrant>>()
  for (const g of input.grants) {
    if (g.parentGrantId !== null && byId.has(g.parentGrantId)) {
      children.set(g.parentGrantId, [...(children.get(g.parentGrantId) ?? []), g])
    }
  }
  const render = (g: PrincipalGrant, parent: PrincipalGrant | undefined): string => {
    const kids = (children.get(g.grantId) ?? []).map((c) => `<div class="child grant" id="grant-${escape(c.grantId)}" data-grant="${escape(c.grantId)}">${render(c, g)}</div>`).join("")
    return `${grantBody(g, parent?.agentName)}
<div class="actions">${revokeButton(input.session, g)}</div>
${kids.length > 0 ? `<p class="meta">It has passed some of this access on to:</p>${kids}` : ""}`
  }
  const roots = input.grants.filter((g) => g.parentGrantId === null || !byId.has(g.parentGrantId))
  const grants = roots.length === 0
    ? `<p class="notice" id="empty">No agent can act for you right now.</p>`
    : roots.map((g) => `<section class="card grant" id="grant-${escape(g.grantId)}" data-grant="${escape(g.grantId)}">${render(g, undefined)}</section>`).join("\n")
  const passkeys = input.passkeys.length === 0
    ? ""
    : `<h2 id="passkeys-title">Your passkeys</h2>
<ul id="passkeys">${input.passkeys.map((p) =>
      `<li class="card passkey" data-passkey="${escape(p.id)}"><strong>${escape(passkeyName(p))}</strong>
<p class="meta">${escape(p.providerName ?? "Unknown provider")}${p.backedUp ? ", synced" : ""}; added ${escape(when(p.createdAt))}${p.lastUsedAt ? `; last used ${escape(when(p.lastUsedAt))}` : ""}</p>
<form class="rename" method="post" action="/permissions/passkeys/rename">${hidden("session", input.session)}${hidden("passkeyId", p.id)}
<input name="deviceName" aria-label="Name" maxlength="100" required value="${escape(p.deviceName ?? "")}"><button type="submit">Rename</button></form>
<div class="actions"><form method="post" action="/permissions/passkeys/remove">${hidden("session", input.session)}${hidden("passkeyId", p.id)}<button class="danger" type="submit">Remove</button></form></div></li>`).join("")}</ul>`
  const signal = input.signal === undefined
    ? ""
    : `<div id="signal" hidden data-rp-id="${escape(input.signal.rpId)}" data-user-id="${escape(input.signal.userId)}" data-credential-ids="${escape(JSON.stringify(input.signal.allAcceptedCredentialIds))}" data-name="${escape(input.signal.name)}" data-display-name="${escape(input.signal.displayName)}"></div>`
  return shell(
    "Your permissions",
    `<h1>Agents acting for you</h1>
<p class="lead">These agents may act on your behalf (${escape(input.principalId)}). Revoking takes effect at once, for the agent and for anything it passed your access on to.</p>
${input.notice ? `<p class="notice" id="notice" role="status">${escape(input.notice)}</p>` : ""}
${grants}
${input.more ? `<p class="meta">Only the newest ${input.grants.length} are shown.</p>` : ""}
${passkeys}
<p class="meta">This page stays open until ${escape(when(input.sessionExpiresAt))}.</p>
${signal}`,
    input.signal !== undefined
  )
}

/** "Revoke access for X?": the second step of a revocation. */
export const confirmPage = (session: string, grant: PrincipalGrant, delegated: ReadonlyArray<PrincipalGrant>): Page =>
  shell(
    `Revoke access for ${grant.agentName}?`,
    `<h1>Revoke access for <span class="agent-name">${escape(grant.agentName)}</span>?</h1>
<p class="did">${escape(grant.agentDid)}</p>
<p>It will no longer be able to:</p>
${scopeList(grant)}
${delegated.length > 0 ? `<p id="cascade">Access it passed on is revoked too: ${delegated.map((d) => escape(d.agentName)).join(", ")}.</p>` : ""}
<div class="actions">
<form method="post" action="/permissions/revoke/confirm">${hidden("session", session)}${hidden("grantId", grant.grantId)}<button class="primary-danger" type="submit" id="confirm">Revoke access</button></form>
<form method="post" action="/permissions/view">${hidden("session", session)}<button type="submit" id="cancel">Cancel</button></form>
</div>`,
    false
  )

/**
 * The page's script: moves the session token from the URL fragment into the first form post (and
 * out of the address bar), then keeps password managers in step with the WebAuthn Signal API.
 */
export const PERMISSIONS_SCRIPT = `(() => {
  const boot = document.getElementById("boot");
  if (boot) {
    const match = /(?:^#|&)session=([^&]+)/.exec(window.location.hash);
    if (!match) { document.getElementById("boot-status").textContent = "This link is incomplete. Ask the application for a new one."; return; }
    history.replaceState(null, "", window.location.pathname);
    boot.elements.session.value = decodeURIComponent(match[1]);
    boot.submit();
    return;
  }
  const signal = document.getElementById("signal");
  const PKC = window.PublicKeyCredential;
  if (!signal || !PKC) return;
  const rpId = signal.dataset.rpId, userId = signal.dataset.userId;
  const quiet = (p) => { if (p && p.catch) p.catch(() => {}); };
  try {
    if (PKC.signalAllAcceptedCredentials) quiet(PKC.signalAllAcceptedCredentials({ rpId, userId, allAcceptedCredentialIds: JSON.parse(signal.dataset.credentialIds) }));
    if (PKC.signalCurrentUserDetails) quiet(PKC.signalCurrentUserDetails({ rpId, userId, name: signal.dataset.name, displayName: signal.dataset.displayName }));
  } catch (e) {}
})();
`
