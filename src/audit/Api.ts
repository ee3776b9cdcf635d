/** The main audit log (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class AuditApi extends HttpApiGroup.make("audit") {}
