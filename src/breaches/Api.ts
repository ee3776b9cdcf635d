/** DPDP breach register (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class BreachesApi extends HttpApiGroup.make("breaches") {}
