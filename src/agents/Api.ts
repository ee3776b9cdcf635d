/** Agents (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class AgentsApi extends HttpApiGroup.make("agents") {}
