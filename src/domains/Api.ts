/** Custom domains (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class DomainsApi extends HttpApiGroup.make("domains") {}
