/**
 * Summaries, descriptions and examples of sign-up, the account and its API keys; DevelopersApi
 * carries them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { DEV, T } from "../platform/DocExamples.ts"

const API_KEY = "sk_test_4eC39HqLyjWDarjtT1zdp7dcQmV8xN2bR5kY7wE1uZ0"
const READ_KEY = "sk_test_7Hq2Wd9Lm4Rt6Yb1Nc8Vx3Zp5Ka0Js2Fe7Gu4Ti9Ow1"
const KEY_ID = "key_01JDQ96A2B3C4D5E6F7G8H9J0K"
const FIRST_KEY_ID = "key_01JDQ8ZK3M4N5P6Q7R8S9T0VWY"
const developer = { developerId: DEV, name: "Acme Assistants", email: "dev@acme.example", mode: "sandbox", plan: "free", fidoRequired: false, createdAt: T }

export const DEVELOPERS_DOCS = {
  signup: {
    summary: "Sign up a developer",
    description: "Creates your developer account and answers its API key, **shown once**: store it on your backend. No key needed. `mode: \"sandbox\"` gives an `sk_test_` key whose authorization requests skip the consent page (the code comes back at once), for trying the flow with curl. 409 when the email is taken. An operator may close sign-up (`SIGNUP_ENABLED=false`): it then answers 403 `SIGNUP_DISABLED` and accounts are created with `agent-auth developers create`.",
    request: { name: "Acme Assistants", email: "dev@acme.example", mode: "sandbox" },
    response: { ...developer, apiKey: API_KEY }
  },
  me: { summary: "Read your account", description: "The developer the API key belongs to. Never shows the key.", response: developer },
  updateMe: {
    summary: "Update your account",
    description: "Changes the name or `fidoRequired`. With `fidoRequired: true` every consent approval needs a passkey assertion (`POST /v1/webauthn/assert/verify`); the consent page's plain Approve answers 403 `FIDO_REQUIRED`.",
    request: { fidoRequired: true },
    response: { ...developer, fidoRequired: true }
  },
  createKey: {
    summary: "Create an API key",
    description: "Makes another named key for your account, `full` (everything) or `read` (an auditor's or a dashboard's: GET operations and `POST /v1/tokens/verify` only; anything else answers 403 `INSUFFICIENT_KEY_SCOPE`). The key is **shown once**; `prefix` (its first 12 characters) is what the list shows to tell keys apart. At most 10 live keys (a rotated key counts until its grace period ends): the 11th answers 409 `CONFLICT`. Recorded on your audit chain as `service.key.created` with the key's id.",
    request: { name: "Auditor (read only)", scope: "read" },
    response: { id: KEY_ID, name: "Auditor (read only)", scope: "read", apiKey: READ_KEY, prefix: READ_KEY.slice(0, 12), createdAt: T }
  },
  listKeys: {
    summary: "List your API keys",
    description: "Your live keys, newest first: each one's id, name, scope, prefix and when it was made and last used. Never the key or its hash. `lastUsedAt` is written at most once a minute per key, so it may be up to a minute behind. A rotated key is listed (under the same name as its replacement) until its grace period ends. The key your account was created with is named `Default`.",
    response: { keys: [{ id: KEY_ID, name: "Auditor (read only)", scope: "read", prefix: READ_KEY.slice(0, 12), createdAt: T, lastUsedAt: null }, { id: FIRST_KEY_ID, name: "Default", scope: "full", prefix: API_KEY.slice(0, 12), createdAt: T, lastUsedAt: T }] }
  },
  deleteKey: {
    summary: "Delete an API key",
    description: "The key stops working at once (on every instance within moments). Deleting a rotated key ends its grace period early. Your last full key cannot be deleted (409 `CONFLICT`: create another full key first); a key that is not yours answers 404. Needs a full key. Recorded on your audit chain as `service.key.deleted` with the key's id."
  },
  rotateKey: {
    summary: "Rotate the calling API key",
    description: "Replaces the key that makes this call with a new one of the same name and scope, **shown once**. With `gracePeriodSeconds` (0 to 86400, default 0) the old key keeps answering that long, so a deployment can roll the new key out without an outage; after it, or at once with 0, the old key answers 401. A key can be rotated once (again: 409 `CONFLICT`; rotate its replacement). A `read` key may rotate itself. Needs no body for an immediate rotation. Recorded on your audit chain as `service.key.rotated` with the old and new key ids.",
    request: { gracePeriodSeconds: 3600 },
    response: { apiKey: "sk_test_9fK2LmQ7xR4tVb8nWc3yZp1dAe6Hs0Jk2Lq5Nr8Tu1W", rotatedAt: T }
  }
} satisfies Record<string, OperationDoc>
