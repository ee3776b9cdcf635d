/** Summary, description and example of the live event stream (decisions §23); EventsApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { EVENT, T } from "../platform/DocExamples.ts"

export const EVENTS_DOCS = {
  stream: {
    summary: "Stream events live (server-sent events)",
    description: "Answers `text/event-stream`: every event of your account as it is committed, each as `id: <eventId>`, `event: <type>` and `data: <the webhook payload JSON>` (the body a webhook delivery carries: `id`, `type`, `createdAt`, `data`). `types=a,b` keeps only those types. The stream reads the outbox, so any instance streams every event; reconnect with the `Last-Event-ID` header (EventSource does it for you) and you receive every event after that one, none twice and none missed, as long as it is kept (7 days; an id no longer kept resumes from the oldest kept event). Without it the stream starts now. Events are sent in commit order; an event waits while an older write transaction is still running. A comment line (`: keep-alive`) comes every 15 s of silence. At most 5 open streams per developer, across instances: another answers 429 `TOO_MANY_CONNECTIONS` (a stream that ended without closing, its instance gone, stops counting within 45 s). A `read` key may stream.",
    response: `id: ${EVENT}\nevent: grant.created\ndata: {"id":"${EVENT}","type":"grant.created","createdAt":"${T}","data":{"grantId":"grt_…"}}\n\n`,
    responseType: "text/event-stream"
  },
  get: {
    summary: "Read one event",
    description: "One event of your account by id, as a webhook delivery and the stream carry it (`id`, `type`, `createdAt`, `data`): the body of a delivery in your history (`eventId`). 404 for another developer's event or one no longer kept.",
    response: { id: EVENT, type: "grant.created", createdAt: T, data: { grantId: "grnt_01JDQ9A0B1C2D3E4F5G6H7J8K9", agentId: "ag_01JDQ98H9J0K1M2N3P4Q5R6S7T", principalId: "user_8f3a", scopes: ["email:read"] } }
  }
} satisfies Record<string, OperationDoc>
