/** Grants, delegation and token verification (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class GrantsApi extends HttpApiGroup.make("grants") {}
