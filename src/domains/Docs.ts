/** Summaries, descriptions and examples of custom domains; DomainsApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { T } from "../platform/DocExamples.ts"

const domain = { id: "dom_01JDQ9AK1M2N3P4Q5R6S7T8V9W", domain: "auth.acme.example", verified: false, verifiedAt: null, createdAt: T }

export const DOMAINS_DOCS = {
  list: { summary: "List your domains", description: "Every domain you added, verified or not.", response: { domains: [{ ...domain, verified: true, verifiedAt: T }] } },
  create: {
    summary: "Add a domain",
    description: "Answers the TXT record to publish: `_agent-auth.<domain>` with value `agent-auth-verify=<verificationToken>`; then call verify. 409 when you added it already or another developer verified it.",
    request: { domain: "auth.acme.example" },
    response: {
      ...domain, verificationToken: "4c1f0e9a7b2d", instructions: "Add a TXT record _agent-auth.auth.acme.example with the value agent-auth-verify=4c1f0e9a7b2d, then POST /v1/domains/{id}/verify",
      verificationRecord: { type: "TXT", name: "_agent-auth.auth.acme.example", value: "agent-auth-verify=4c1f0e9a7b2d" }
    }
  },
  verify: {
    summary: "Verify a domain",
    description: "Looks up the TXT record now. 422 `VERIFICATION_FAILED` when no record matches (DNS may take minutes to propagate: call again), 502 `DNS_UNAVAILABLE` when the resolver fails, 409 when another developer verified the domain first.",
    response: { ...domain, verified: true, verifiedAt: T }
  },
  remove: { summary: "Remove a domain", description: "Removes the domain; another developer may then verify it." }
} satisfies Record<string, OperationDoc>
