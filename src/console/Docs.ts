/** Summaries and descriptions of the developer console's pages (decisions §23); ConsoleApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"

const page = "<!doctype html>…"

export const CONSOLE_DOCS = {
  home: {
    summary: "Developer console",
    description: "The console's entry: the sign-in form (an API key, exchanged for a 12-hour `__Host-` session cookie bound to that key; a `read` key opens a read-only console), or the overview once signed in. Server-rendered HTML with no script and no third-party asset, under a strict CSP. The console is a client of this API: every page reads, and every form acts, through the operations of this document, as the signed-in key.",
    response: page,
    responseType: "text/html"
  },
  live: {
    summary: "The console's live events",
    description: "What the console's pages listen to (EventSource, with the session cookie): `GET /v1/events/stream` called by the console as the signed-in key and relayed as it answers (same `types`, `Last-Event-ID`, heartbeats, limit of open streams). Without a session 401.",
    response: "id: evt_…\nevent: grant.created\ndata: {…}\n\n",
    responseType: "text/event-stream"
  },
  page: {
    summary: "A console page",
    description: "One console page by name (`overview`, `agents`, `consent`, `audit`, `webhooks`, `policies`, `anomalies`, `keys`, `directory`, `sso`, `vault`, `breaches`, `compliance`, `billing`, `dpdp`), rendered from this API's answers. Without a session: the sign-in form. A key deleted or no longer valid ends the session.",
    response: page,
    responseType: "text/html"
  },
  signIn: {
    summary: "Sign in to the console (form)",
    description: "The sign-in form's post: `apiKey` and the form's `csrf` token (it must match the sign-in cookie the form came with). Answers 303 to the overview with the session cookie (HttpOnly, Secure, SameSite=Strict, 12 hours); an unknown key answers the form again (401); a post from another site 403.",
    request: { apiKey: "sk_live_…", csrf: "…" },
    response: page,
    responseType: "text/html"
  },
  signOut: {
    summary: "Sign out of the console (form)",
    description: "Ends the session (its row is deleted) and clears the cookie; 303 to the sign-in form. Needs the session's `csrf` token.",
    request: { csrf: "…" },
    response: page,
    responseType: "text/html"
  },
  action: {
    summary: "A console form's action",
    description: "A console form's post: `csrf` (the session's token) and the action's fields. Each action is one operation of this API called as the signed-in key (for example `agents/create` is `POST /v1/agents`, `consent/approve` is `POST /v1/consent/{id}/approve`, `policies/evaluate` is `POST /v1/policies/evaluate`), so a `read` key's console is refused every change exactly as the API refuses it. Answers the page with the result above it. A post from another site (Sec-Fetch-Site or Origin) or without the session's token answers 403 and changes nothing.",
    request: { csrf: "…", name: "Inbox helper", scopes: "email:read" },
    response: page,
    responseType: "text/html"
  }
} satisfies Record<string, OperationDoc>
