/** Webhooks (placeholder: endpoints land with the capability). */
import { HttpApiGroup } from "@effect/platform"

export class WebhooksApi extends HttpApiGroup.make("webhooks") {}
