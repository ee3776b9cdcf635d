/**
 * The console's HTML (decisions §23): one self-contained document per page, no script, no third-party
 * asset, styles by a per-response nonce under the same kind of CSP as the consent and permissions
 * pages; readable from 390 px up; landmarks, labels and visible focus for keyboard use.
 */
import { createHash, randomBytes } from "node:crypto"

export const escape = (s: unknown): string =>
  String(s ?? "").replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;")

export interface Page {
  readonly html: string
  readonly csp: string
}

/** the pages in the navigation, most used first: [path segment, label] */
export const NAV: ReadonlyArray<readonly [string, string]> = [
  ["overview", "Overview"],
  ["agents", "Agents"],
  ["consent", "Consent & grants"],
  ["audit", "Audit log"],
  ["webhooks", "Webhooks"],
  ["policies", "Policies"],
  ["anomalies", "Anomalies"],
  ["keys", "API keys"],
  ["directory", "Directory"],
  ["sso", "SSO"],
  ["vault", "Vault"],
  ["breaches", "Breaches"],
  ["compliance", "Compliance"],
  ["billing", "Billing"],
  ["dpdp", "DPDP"]
]

const STYLE = `
  :root { color-scheme: light; --fg: #1d2430; --muted: #4d5563; --bg: #f5f6f8; --card: #fff; --accent: #1a56c4; --danger: #a61b10; --ok: #146c2e; --line: #c9ced6; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
  a { color: var(--accent); }
  a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, textarea:focus-visible, [tabindex]:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
  .skip { position: absolute; left: -999px; top: 0; background: var(--card); padding: .5rem 1rem; }
  .skip:focus { left: .5rem; z-index: 2; }
  header { background: #16202e; color: #fff; padding: .6rem 1rem; display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; justify-content: space-between; }
  header .brand { font-weight: 600; }
  header .who { font-size: .85rem; display: flex; gap: .75rem; align-items: center; flex-wrap: wrap; }
  header .who button { color: #fff; border-color: #8a97aa; min-height: 36px; padding: .25rem .75rem; }
  nav ul { list-style: none; margin: 0; padding: .5rem 1rem; display: flex; flex-wrap: wrap; gap: .25rem .5rem; background: var(--card); border-bottom: 1px solid var(--line); }
  nav a { display: inline-block; padding: .35rem .6rem; border-radius: 6px; text-decoration: none; min-height: 32px; }
  nav a[aria-current="page"] { background: var(--accent); color: #fff; }
  main { max-width: 72rem; margin: 1rem auto; padding: 0 1rem 3rem; }
  h1 { font-size: 1.45rem; margin: .5rem 0 1rem; }
  h2 { font-size: 1.1rem; margin: 0 0 .5rem; }
  h1, h2, p { overflow-wrap: anywhere; }
  .card { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 1rem; margin: 0 0 1rem; }
  .grid { display: grid; gap: 1rem; grid-template-columns: repeat(auto-fit, minmax(15rem, 1fr)); }
  .stat { font-size: 1.6rem; font-weight: 600; margin: 0; }
  .muted { color: var(--muted); }
  .notice { border-left: 4px solid var(--ok); }
  .error { border-left: 4px solid var(--danger); }
  .scroll { overflow-x: auto; }
  table { border-collapse: collapse; width: 100%; font-size: .9rem; }
  th, td { text-align: left; padding: .4rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
  th { font-weight: 600; white-space: nowrap; }
  td code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: .82rem; }
  td code { white-space: nowrap; }
  pre { background: #eef0f3; padding: .75rem; border-radius: 6px; overflow-x: auto; font-size: .8rem; white-space: pre-wrap; overflow-wrap: anywhere; }
  form.stack { display: grid; gap: .6rem; max-width: 36rem; }
  form.inline { display: inline-flex; gap: .4rem; flex-wrap: wrap; margin: .15rem .25rem .15rem 0; align-items: center; }
  label { font-weight: 600; font-size: .9rem; display: grid; gap: .2rem; }
  label span.hint { font-weight: 400; color: var(--muted); font-size: .82rem; }
  input, select, textarea { font: inherit; padding: .45rem .55rem; border: 1px solid #8a93a1; border-radius: 6px; background: #fff; color: var(--fg); min-height: 40px; width: 100%; }
  textarea { min-height: 8rem; font-family: ui-monospace, Menlo, monospace; font-size: .85rem; }
  button { font: inherit; min-height: 40px; padding: .4rem .9rem; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
  button.secondary { background: transparent; color: var(--accent); }
  button.danger { background: transparent; border-color: var(--danger); color: var(--danger); }
  .badge { display: inline-block; padding: 0 .45rem; border-radius: 999px; border: 1px solid var(--line); font-size: .8rem; }
  .ok { color: var(--ok); } .bad { color: var(--danger); }
  details summary { cursor: pointer; min-height: 32px; }
  @media (max-width: 30rem) {
    main { padding: 0 .6rem 2rem; }
    .card { padding: .75rem; }
    nav ul { padding: .4rem .6rem; }
    form.inline button { min-height: 40px; }
  }
`

/**
 * The one script (inline, allowed by its hash): where a page marks a region `data-live`, it listens to
 * the account's events (GET /console/live relays GET /v1/events/stream) and, when one of the region's
 * types arrives, fetches the page again and swaps the region in (again a moment later, for delivery
 * states that change after the event). Without it the pages work the same, by reloading.
 */
const LIVE_SCRIPT = `(function () {
  var regions = document.querySelectorAll("[data-live]");
  if (regions.length === 0 || !window.EventSource || !window.fetch) return;
  var status = document.getElementById("live-status");
  var say = function (text) { if (status) status.textContent = text; };
  var types = {};
  regions.forEach(function (r) { r.getAttribute("data-live").split(",").forEach(function (t) { types[t] = true; }); });
  var refresh = function () {
    regions.forEach(function (region) {
      if (region.contains(document.activeElement) && document.activeElement !== document.body) return;
      fetch(region.getAttribute("data-live-src"), { credentials: "same-origin" }).then(function (r) { return r.ok ? r.text() : null; }).then(function (html) {
        if (html === null) return;
        // the page's own style and script are left out: parsing them again would only trip the CSP
        var body = html.replace(/<style[\\s\\S]*?<\\/style>/g, "").replace(/<script[\\s\\S]*?<\\/script>/g, "");
        var fresh = new DOMParser().parseFromString(body, "text/html").querySelector('[data-live-id="' + region.getAttribute("data-live-id") + '"]');
        if (fresh) region.innerHTML = fresh.innerHTML;
      }).catch(function () {});
    });
  };
  var source = new EventSource("/console/live?types=" + encodeURIComponent(Object.keys(types).join(",")));
  source.onopen = function () { say("Live: updates as events arrive."); };
  source.onerror = function () { say("Live updates reconnecting…"); };
  Object.keys(types).forEach(function (type) {
    source.addEventListener(type, function () { say("Live: " + type + " just now."); refresh(); setTimeout(refresh, 1500); });
  });
})();`
const LIVE_HASH = `'sha256-${createHash("sha256").update(LIVE_SCRIPT).digest("base64")}'`

const csp = (nonce: string) => [
  "default-src 'none'",
  `style-src 'nonce-${nonce}'`,
  `script-src ${LIVE_HASH}`,
  "connect-src 'self'",
  "img-src 'self' data:",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'"
].join("; ")

const document = (title: string, body: string): Page => {
  const nonce = randomBytes(16).toString("base64")
  return {
    csp: csp(nonce),
    html: `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escape(title)} · Console</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
${body}
<script>${LIVE_SCRIPT}</script>
</body>
</html>
`
  }
}

export interface Frame {
  readonly current: string
  readonly developerName: string
  readonly scope: "full" | "read"
  readonly csrf: string
}

/** hidden CSRF field of every form */
export const csrfField = (csrf: string) => `<input type="hidden" name="csrf" value="${escape(csrf)}">`

/** a page of the signed-in console */
export const consolePage = (frame: Frame, title: string, content: string): Page =>
  document(title, `<a class="skip" href="#main">Skip to content</a>
<header>
  <span class="brand">agent-auth console</span>
  <span class="who"><span>${escape(frame.developerName)}${frame.scope === "read" ? ` <span class="badge">read-only key</span>` : ""}</span>
    <form method="post" action="/console/sign-out" class="inline">${csrfField(frame.csrf)}<button type="submit" class="secondary">Sign out</button></form>
  </span>
</header>
<nav aria-label="Console sections"><ul>
${NAV.map(([path, label]) =>
    `<li><a href="/console/${path}"${path === frame.current ? ` aria-current="page"` : ""}>${escape(label)}</a></li>`).join("\n")}
</ul></nav>
<main id="main">
<h1>${escape(title)}</h1>
<p id="live-status" class="muted" aria-live="polite"></p>
${content}
</main>`)

export const signInPage = (csrf: string, message?: string): Page =>
  document("Sign in", `<main id="main">
<h1>Developer console</h1>
<div class="card">
<p>Sign in with one of your API keys. A <strong>read</strong> key opens a read-only console. The key is exchanged for a session cookie
valid 12 hours; deleting the key ends its sessions.</p>
${message === undefined ? "" : `<p class="bad" role="alert">${escape(message)}</p>`}
<form method="post" action="/console/sign-in" class="stack">
${csrfField(csrf)}
<label for="apiKey">API key <span class="hint">sk_live_… or sk_test_…</span></label>
<input id="apiKey" name="apiKey" type="password" autocomplete="off" required>
<button type="submit">Sign in</button>
</form>
</div>
</main>`)

export const messagePage = (title: string, text: string): Page =>
  document(title, `<main id="main"><h1>${escape(title)}</h1><div class="card"><p>${escape(text)}</p><p><a href="/console">Back to the console</a></p></div></main>`)

// ---- pieces -----------------------------------------------------------------------------------

/** a region the page's script refreshes when one of `types` happens (fetched again from `src`) */
export const live = (id: string, types: ReadonlyArray<string>, src: string, content: string) =>
  `<div data-live="${escape(types.join(","))}" data-live-id="${escape(id)}" data-live-src="${escape(src)}">${content}</div>`

export const card = (title: string, content: string) => `<section class="card" aria-label="${escape(title)}"><h2>${escape(title)}</h2>${content}</section>`

/** a table of rows; cells are HTML (escape what comes from data) */
export const table = (caption: string, headers: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) =>
  rows.length === 0
    ? `<p class="muted">Nothing yet.</p>`
    : `<div class="scroll" role="region" aria-label="${escape(caption)}" tabindex="0"><table>
<thead><tr>${headers.map((h) => `<th scope="col">${escape(h)}</th>`).join("")}</tr></thead>
<tbody>${rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("\n")}</tbody></table></div>`

export const code = (s: unknown) => `<code>${escape(s)}</code>`

export const when = (s: unknown) => s === null || s === undefined ? `<span class="muted">—</span>` : `<span class="mono">${escape(String(s).replace("T", " ").replace(/\.\d+Z$/, "Z"))}</span>`

export const json = (value: unknown) => `<pre>${escape(JSON.stringify(value, null, 2))}</pre>`

let fieldCount = 0
/** a labelled input */
export const field = (name: string, label: string, options: { type?: string; value?: string; hint?: string; required?: boolean; textarea?: boolean; placeholder?: string } = {}) => {
  const id = `f-${name}-${++fieldCount}`
  const attrs = `id="${id}" name="${escape(name)}"${options.required ? " required" : ""}${options.placeholder ? ` placeholder="${escape(options.placeholder)}"` : ""}`
  const input = options.textarea
    ? `<textarea ${attrs}>${escape(options.value ?? "")}</textarea>`
    : `<input ${attrs} type="${options.type ?? "text"}" value="${escape(options.value ?? "")}">`
  return `<label for="${id}">${escape(label)}${options.hint ? ` <span class="hint">${escape(options.hint)}</span>` : ""}</label>${input}`
}

/** a labelled choice; a choice is its value, or [value, what it shows] */
export const select = (name: string, label: string, choices: ReadonlyArray<string | readonly [string, string]>, value?: string) => {
  const id = `f-${name}-${++fieldCount}`
  return `<label for="${id}">${escape(label)}</label><select id="${id}" name="${escape(name)}">${
    choices.map((c) => {
      const [v, shown] = typeof c === "string" ? [c, c] : c
      return `<option value="${escape(v)}"${v === value ? " selected" : ""}>${escape(shown)}</option>`
    }).join("")
  }</select>`
}

/** a form posting to /console/<page>/<action>; read-only consoles get none (the API would refuse it anyway) */
export const form = (frame: Frame, action: string, content: string, button: string, style: "stack" | "inline" = "stack", kind = "") =>
  frame.scope === "read"
    ? ""
    : `<form method="post" action="/console/${frame.current}/${action}" class="${style}">${csrfField(frame.csrf)}${content}<button type="submit"${kind ? ` class="${kind}"` : ""}>${escape(button)}</button></form>`

/** one button acting on one id */
export const button = (frame: Frame, action: string, fields: Record<string, string>, label: string, kind = "secondary") =>
  form(frame, action, Object.entries(fields).map(([k, v]) => `<input type="hidden" name="${escape(k)}" value="${escape(v)}">`).join(""), label, "inline", kind)
