/** Summaries, descriptions and examples of the DPDP breach register; BreachesApi carries them. */
import type { OperationDoc } from "../platform/OperationDocs.ts"
import { T } from "../platform/DocExamples.ts"

const BREACH = "brch_01JDQ97G8H9J0K1M2N3P4Q5R6S"
const report = { updatedDetails: null, factsCircumstancesReasons: null, mitigation: null, causeFindings: null, remedialMeasures: null }
const breach = {
  breachId: BREACH, status: "open", description: "A laptop with a customer export was stolen", nature: "Loss of device", extent: "Names and email addresses",
  occurredAt: "2026-11-23T18:00:00.000Z", awareAt: T, location: "Pune office", likelyImpact: null, affectedCount: 2, mitigation: null, detailedReport: report,
  boardInitialIntimationRequired: true, boardInitialIntimationSentAt: null, boardDetailedReportDueAt: "2026-11-27T09:30:00.000Z", boardDetailedReportSentAt: null,
  boardDetailedReportOverdue: false, boardDetailedReportLate: false, extension: null, principalIntimationRequired: true,
  principalIntimation: { due: "without_delay", intimatedCount: 0, pendingCount: 2, lastIntimatedAt: null }, createdAt: T, updatedAt: null, closedAt: null
}
const intimation = {
  intimationId: "bint_01JDQ9HT8V9W0XYZABCDEFGHJK", channel: "email", intimatedAt: T, principalCount: 2,
  contentIncluded: ["description", "likely_consequences", "mitigation", "safety_measures", "contact"], contentMissing: [], createdAt: T
}

export const BREACHES_DOCS = {
  record: {
    summary: "Record a breach",
    description: "Records a personal data breach; the Board's detailed report is due 72 hours after `awareAt` (default now). Give the affected principals' ids (`affectedDataPrincipalIds`, up to 10,000; never echoed in events or lists) or only `affectedCount`. Emits `dpdp.breach.recorded` and `dpdp.breach.principal_intimation_due` (ids and times only, no breach text). The service notifies no one. Unknown fields answer 400: the body is checked by the handler, the schema here describes it. This resource's id is `breachId`.",
    request: { description: "A laptop with a customer export was stolen", nature: "Loss of device", extent: "Names and email addresses", occurredAt: "2026-11-23T18:00:00Z", location: "Pune office", affectedDataPrincipalIds: ["user_42", "user_43"] },
    response: { ...breach, affectedDataPrincipalIds: ["user_42", "user_43"], principalIntimations: [] }
  },
  list: { summary: "List breaches", description: "Newest first, without principal ids; filter by `status`; page with `cursor` / `limit`. `boardDetailedReportOverdue` is computed now.", response: { breaches: [breach], nextCursor: null } },
  get: { summary: "Read a breach", description: "One breach with its principal intimations (newest first, at most 200).", response: { ...breach, affectedDataPrincipalIds: ["user_42", "user_43"], principalIntimations: [intimation] } },
  update: {
    summary: "Update a breach",
    description: "Moves the status one step (open → initial_intimated → reported → closed; anything else 409 `INVALID_TRANSITION`), fills the detailed report (all five fields are needed to reach `reported`: 400 `REPORT_INCOMPLETE`), records when the Board was told, or an extension (a granted `newDueAt` moves the deadline). A closed breach refuses every update (409 `BREACH_CLOSED`). A status change emits `dpdp.breach.updated { breachId, status, previousStatus }`. The body is checked by the handler; the schema here describes it.",
    request: { status: "initial_intimated", boardInitialIntimationSentAt: "2026-11-24T11:00:00Z" },
    response: { ...breach, status: "initial_intimated", boardInitialIntimationSentAt: "2026-11-24T11:00:00.000Z", affectedDataPrincipalIds: ["user_42", "user_43"], updatedAt: T }
  },
  intimate: {
    summary: "Record principals intimated",
    description: "Records that you told these data principals, by which channel and with which of the five required content items (`contentMissing` lists the ones left out). When the breach listed ids, each intimated id must be one of them. The body is checked by the handler; the schema here describes it.",
    request: { dataPrincipalIds: ["user_42", "user_43"], channel: "email", contentIncluded: ["description", "likely_consequences", "mitigation", "safety_measures", "contact"] },
    response: { breachId: BREACH, ...intimation, principalIntimation: { due: "without_delay", intimatedCount: 2, pendingCount: 0, lastIntimatedAt: T } }
  }
} satisfies Record<string, OperationDoc>
