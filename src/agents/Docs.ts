/**
 * Summaries, descriptions and examples of agent registration and management; AgentsApi carries
 * them.
 */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { AGENT, DEV, DID, T } from "../platform/DocExamples.ts"

const CURSOR = "eyJjIjoiMjAyNi0xMS0yNFQwOTozMDowMC4wMDBaIiwiaSI6ImFnXzAxIn0"
const agent = {
  agentId: AGENT, did: DID, developerId: DEV, name: "Inbox helper", description: "Sorts and summarises email",
  scopes: ["email:read", "calendar:read"], status: "active", redirectUris: ["https://app.acme.example/agent/callback"], createdAt: T, updatedAt: T
}

export const AGENTS_DOCS = {
  create: {
    summary: "Register an agent",
    description: "Registers a software agent with the scopes it may ever ask for (authorization requests for other scopes answer 422 `INVALID_SCOPES`) and the redirect URIs consent may return to (https, or http to a loopback host; no fragment; at most 20). Its DID is `did:<method>:<agentId>`.",
    request: { name: "Inbox helper", description: "Sorts and summarises email", scopes: ["email:read", "calendar:read"], redirectUris: ["https://app.acme.example/agent/callback"] },
    response: agent
  },
  list: {
    summary: "List agents",
    description: "Your agents, newest first; page with `cursor` / `limit` (1–100). `origin` (`api`, `dcr`, `cimd`) lists only the agents that are OAuth clients of that origin: yours given a client profile, or clients that registered themselves at your issuer.",
    response: { agents: [agent], nextCursor: CURSOR }
  },
  get: { summary: "Read an agent", description: "One of your agents by `agentId` (the path's `id` is the `agentId`). An agent that is an OAuth client carries its profile in `oauth` (`clientId`, `origin`, `clientType`, `tokenEndpointAuthMethod`, `redirectUris`, `grantTypes`, `applicationType`, `clientUri`, `tokenExchange`, `verified`).", response: agent },
  update: {
    summary: "Update or suspend an agent",
    description: "Changes name, description, scopes, redirect URIs or `status`. A `suspended` agent gets no new grants, tokens or bundles (403 `AGENT_SUSPENDED`) until set `active` again; its existing grants stay as they are (revoke them to stop them). A client that registered itself (DCR, CIMD) is read-only but for `status`: anything else answers 409 `CONFLICT`.",
    request: { status: "suspended" },
    response: { ...agent, status: "suspended" }
  },
  remove: { summary: "Delete an agent", description: "Deletes the agent; it can no longer be authorized." }
} satisfies Record<string, OperationDoc>
