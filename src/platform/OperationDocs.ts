/**
 * An endpoint's documentation for the OpenAPI document, kept beside the endpoint: each capability
 * writes its group's docs keyed by endpoint name (its Docs.ts) and attaches them in its Api.ts with
 * `.pipe(documented(DOCS))`, which the compiler checks against the group: a name missing or unknown
 * fails to build. openapi/Document.ts reads them back from the groups' annotations.
 */
import type { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Context } from "effect"

export interface OperationDoc {
  readonly summary: string
  /** what it does, who calls it, the rules that surprise */
  readonly description: string
  /** an example request body (operations that read one) */
  readonly request?: unknown
  /** an example of the success answer's JSON body */
  readonly response?: unknown
  /** the success answer's media type when the handler answers another than the generated `application/json` */
  readonly responseType?: string
}

/** a group's annotation: its endpoints' documentation by endpoint name */
export class OperationDocs extends Context.Tag("agent-auth-service/OperationDocs")<OperationDocs, Readonly<Record<string, OperationDoc>>>() {}

type EndpointName<Group> = HttpApiEndpoint.HttpApiEndpoint.Name<HttpApiGroup.HttpApiGroup.Endpoints<Group>>

/** one entry for each endpoint of the group */
export type GroupDocs<Group> = { readonly [Name in EndpointName<Group>]: OperationDoc }

/**
 * Attaches `docs` to the group it is piped onto. Every endpoint of the group needs an entry, and an
 * entry for a name the group lacks (a renamed or removed endpoint) is refused too.
 */
export const documented = <Group extends HttpApiGroup.HttpApiGroup.Any, Docs extends GroupDocs<Group>>(
  docs: Docs & { readonly [Unknown in Exclude<keyof Docs, EndpointName<Group>>]: never }
) =>
(group: Group): Group => (group as unknown as HttpApiGroup.HttpApiGroup.AnyWithProps).annotate(OperationDocs, docs) as unknown as Group
